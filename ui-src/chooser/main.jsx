// Mounts the provider chooser over the server-rendered one on the sign-in page. Until the
// `providers` and `csrf` JSON arrive (or if they never do) the server's forms stay in place
// and work as they are.
import { flushSync } from "react-dom";
import { createRoot } from "react-dom/client";
import { Chooser } from "./Chooser.jsx";

async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return response.json();
}

function rank(page, provider) {
  const at = page.order.indexOf(provider.id);
  return at === -1 ? page.order.length : at;
}

async function mount() {
  const container = document.getElementById("provider-chooser");
  const data = document.getElementById("chooser-data");
  if (!container || !data) return;
  const page = JSON.parse(data.textContent);
  let providers, csrf;
  try {
    [providers, csrf] = await Promise.all([
      getJson(`${page.authBase}/providers`),
      getJson(`${page.authBase}/csrf`),
    ]);
  } catch {
    return; // the server-rendered chooser keeps working
  }
  const submitInPlace = window.htmx
    ? (form) => window.htmx.ajax("POST", form.action, { source: form, target: "#card", select: "#card", swap: "outerHTML" })
    : undefined;
  // Keep the server's order (configuration order); a JSON object's keys arrive sorted.
  // The names are the page's: in its language, where the JSON's are in English.
  const ordered = Object.values(providers)
    .map((p) => ({ ...p, name: page.names[p.id] ?? p.name }))
    .sort((a, b) => rank(page, a) - rank(page, b));
  // Someone may have started typing into the server's forms while the JSON was on its way:
  // carry their input and focus over (the island's fields have the same ids).
  const fields = [...container.querySelectorAll("input[id]:not([type=hidden])")];
  const typed = Object.fromEntries(fields.filter((f) => f.value).map((f) => [f.id, f.value]));
  const focused = container.contains(document.activeElement) ? document.activeElement.id : null;
  const root = createRoot(container);
  flushSync(() =>
    root.render(
      <Chooser providers={ordered} csrfToken={csrf.csrfToken} page={{ ...page, typed }} submitInPlace={submitInPlace} />,
    ),
  );
  if (focused) document.getElementById(focused)?.focus();
}

mount();
