import assert from "node:assert/strict";
import { test } from "node:test";
import { fill } from "../text.js";

test("fills placeholders with text, and leaves unknown ones visible", () => {
  assert.equal(fill("Sign in with {name}", { name: "GitHub" }), "Sign in with GitHub");
  assert.equal(fill("Showing {shown} of {total}", { shown: 2, total: 6 }), "Showing 2 of 6");
  assert.equal(fill("{name} {missing}", { name: "x" }), "x {missing}");
});

test("returns parts for React when a value is an element", () => {
  const element = { type: "code" };
  assert.deepEqual(fill("Key: {key}.", { key: element }), ["Key: ", element, "."]);
  assert.deepEqual(fill("{key}", { key: element }), [element]);
});
