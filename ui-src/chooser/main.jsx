// Mounts the provider chooser over the server-rendered one on the sign-in page. Until the
// `providers` and `csrf` JSON arrive (or if they never do) the server's forms stay in place
// and work as they are.
import { createRoot } from "react-dom/client";
import { Chooser } from "./Chooser.jsx";

async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return response.json();
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
  createRoot(container).render(
    <Chooser providers={Object.values(providers)} csrfToken={csrf.csrfToken} page={page} submitInPlace={submitInPlace} />,
  );
}

mount();
