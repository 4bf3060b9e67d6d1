// The passkey script of pages that offer passkeys outside the sign-in chooser: it shows
// and wires their [data-passkey] elements (hidden in the HTML, so that without JavaScript,
// in a browser without passkeys, or at an address where they cannot work, nothing is
// offered that would not work):
//   <form data-passkey="register">            the account page's "Add a passkey" (field `name`)
//   <button data-passkey="signin">            a passkey sign-in (data-callback-url: where to go)
//   <button data-passkey="second-factor">     a passkey as the second step of a sign-in
// A [data-passkey-message] element beside them (or elsewhere on the page) shows what went
// wrong. The page says where the auth routes are, and gives the words to say, in
// <script type="application/json" id="passkey-data"> (templates/auth/_passkey_script.html).
// Sections htmx swaps in later are wired as they arrive.
import { addPasskey, go, passkeysSupported, problemMessage, signInWithPasskey } from "./ceremony.js";

const KINDS = new Set(["register", "signin", "second-factor"]);

function pageData() {
  try {
    return JSON.parse(document.getElementById("passkey-data")?.textContent ?? "null");
  } catch {
    return null;
  }
}

function say(element, text) {
  const message =
    element.parentElement?.querySelector("[data-passkey-message]") ?? document.querySelector("[data-passkey-message]");
  if (message) message.textContent = text ?? "";
}

async function csrfToken(authBase) {
  const response = await fetch(`${authBase}/csrf`, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`csrf: ${response.status}`);
  return (await response.json()).csrfToken;
}

/** Run `ceremony` on `eventName`, one at a time; go where it ends, or say what went wrong. */
function wire(element, eventName, ceremony, text) {
  const button = element.matches("button") ? element : element.querySelector("button");
  element.addEventListener(eventName, async (event) => {
    event.preventDefault();
    if (button.disabled) return;
    button.disabled = true;
    element.setAttribute("aria-busy", "true");
    say(element, "");
    try {
      go(await ceremony());
      return; // leaving the page: it stays busy
    } catch (error) {
      say(element, problemMessage(error, text));
    }
    button.disabled = false;
    element.setAttribute("aria-busy", "false");
  });
}

function wireWithin(root, data) {
  const found = [...(root.matches?.("[data-passkey]") ? [root] : []), ...root.querySelectorAll("[data-passkey]")];
  for (const element of found) {
    if (!KINDS.has(element.dataset.passkey) || element.dataset.passkeyReady) continue;
    element.dataset.passkeyReady = "true";
    if (data.problem || !passkeysSupported()) {
      // Nothing to offer. The account page says why; the sign-in steps offer other ways.
      if (element.dataset.passkey === "register") {
        say(element, data.problem ?? data.text.unsupported);
      }
      continue;
    }
    element.hidden = false;
    say(element, ""); // the page's words for a browser without the script
    if (element.dataset.passkey === "register") {
      wire(
        element,
        "submit",
        async () =>
          addPasskey({
            authBase: data.authBase,
            csrfToken: await csrfToken(data.authBase),
            name: element.elements.name?.value ?? "",
            text: data.text,
          }),
        data.text,
      );
    } else {
      wire(
        element,
        "click",
        async () =>
          signInWithPasskey({
            authBase: data.authBase,
            csrfToken: await csrfToken(data.authBase),
            callbackUrl: element.dataset.callbackUrl,
            text: data.text,
          }),
        data.text,
      );
    }
  }
}

const data = pageData();
if (data) {
  wireWithin(document, data);
  document.addEventListener("htmx:load", (event) => wireWithin(event.target, data));
}
