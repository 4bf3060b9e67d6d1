// htmx, served from the app (no CDN), configured for a strict Content-Security-Policy.
import htmx from "htmx.org";

Object.assign(htmx.config, {
  // htmx would otherwise add a <style> element, which style-src 'self' refuses.
  includeIndicatorStyles: false,
  // No eval-based features (hx-on, js: values) and no scripts from swapped HTML.
  allowEval: false,
  allowScriptTags: false,
  // Only talk to this site.
  selfRequestsOnly: true,
  // Swaps replace server-rendered sections; keep the page's scroll position.
  scrollIntoViewOnBoost: false,
});

// After a swap, move focus to the new content's heading so keyboard and screen reader users
// land on what changed instead of on a button that no longer exists.
// An element marked data-focus-after-swap (an action's outcome message) wins over the heading.
// The event fires on the new content itself (detail.target is the replaced element).
document.addEventListener("htmx:afterSwap", (event) => {
  const scope = event.target;
  const into = scope.querySelector("[data-focus-after-swap]") ?? scope.querySelector("h1, h2");
  if (!into) return;
  if (!into.hasAttribute("tabindex")) into.setAttribute("tabindex", "-1");
  into.focus();
});

window.htmx = htmx;

// "Cancel" in a confirmation that htmx placed into the page (the nav's sign-out, a removal's
// question in its row's [data-confirm-slot]) closes it, and focus returns to what opened it.
// On the confirmation's own page the link simply leads back.
document.addEventListener("click", (event) => {
  const dismiss = event.target.closest("[data-dismiss]");
  const slot = dismiss?.closest("#signout-slot, [data-confirm-slot]");
  if (!slot) return;
  event.preventDefault();
  slot.replaceChildren();
  const opener = document.querySelector(`[hx-target="#${slot.id}"]`);
  (opener?.matches("form") ? opener.querySelector("button") : opener)?.focus();
});
