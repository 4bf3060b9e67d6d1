// The islands say nothing of their own: every word comes from the page's JSON data, in
// the page's language (the server translates it; there is no second catalogue here).
// A text may hold `{name}` placeholders for what only the island knows; `fill` puts the
// values in.

/**
 * Return `template` with each `{key}` replaced by `values[key]`: a string when every value
 * is text or a number, else an array for React to render (give element values a `key`).
 */
export function fill(template, values) {
  const parts = template
    .split(/\{(\w+)\}/)
    .map((part, index) => (index % 2 ? values[part] ?? `{${part}}` : part))
    .filter((part) => part !== "");
  const plain = parts.every((part) => typeof part === "string" || typeof part === "number");
  return plain ? parts.join("") : parts;
}
