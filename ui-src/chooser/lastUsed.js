// The provider last used in this browser, kept in localStorage (nothing secret: an id and
// a display name). Storage can be unavailable (privacy modes, disabled cookies): then the
// chooser simply has no "last used" entry.
const KEY = "auth.lastProvider";

export function readLastUsed(storage = globalThis.localStorage) {
  try {
    const value = JSON.parse(storage?.getItem(KEY) ?? "null");
    return value && typeof value.id === "string" ? value : null;
  } catch {
    return null;
  }
}

export function rememberLastUsed(provider, storage = globalThis.localStorage) {
  try {
    storage?.setItem(KEY, JSON.stringify({ id: provider.id, name: provider.name }));
  } catch {
    // Full or blocked storage only loses the hint.
  }
}
