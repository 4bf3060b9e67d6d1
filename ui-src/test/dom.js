// Loaded with `node --import` before any test module: a jsdom window as the global scope,
// so React and Testing Library find `document` when they are imported.
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>", {
  url: "http://localhost/auth/signin",
  pretendToBeVisual: true,
});
for (const key of Object.getOwnPropertyNames(dom.window)) {
  if (!(key in globalThis)) globalThis[key] = dom.window[key];
}
globalThis.window = dom.window;
globalThis.document = dom.window.document;
Object.defineProperty(globalThis, "navigator", { value: dom.window.navigator, configurable: true });
// Tell React that tests wrap updates in act() (Testing Library does).
globalThis.IS_REACT_ACT_ENVIRONMENT = true;
