import assert from "node:assert/strict";
import { test } from "node:test";
import { emailProblem, filterProviders, orderProviders } from "../chooser/model.js";

const providers = ["github", "google", "gitlab"].map((id) => ({ id, name: id[0].toUpperCase() + id.slice(1) }));

test("the last used provider comes first, the rest keep their order", () => {
  assert.deepEqual(orderProviders(providers, "gitlab").map((p) => p.id), ["gitlab", "github", "google"]);
});

test("an unknown last used provider changes nothing", () => {
  assert.equal(orderProviders(providers, "nope"), providers);
  assert.equal(orderProviders(providers, undefined), providers);
});

test("the filter matches names case-insensitively and ignores surrounding spaces", () => {
  assert.deepEqual(filterProviders(providers, "  GIT ").map((p) => p.id), ["github", "gitlab"]);
  assert.deepEqual(filterProviders(providers, "oo").map((p) => p.id), ["google"]);
  assert.deepEqual(filterProviders(providers, "zzz"), []);
  assert.equal(filterProviders(providers, ""), providers);
});

test("valid e-mail addresses pass", () => {
  for (const ok of ["ann@example.com", "  Ann@Example.COM ", "a.b+c@sub.example.co.uk", "ｊｏｅ@example.com"]) {
    assert.equal(emailProblem(ok), null, ok);
  }
});

test("invalid e-mail addresses get the key of the message that says what is wrong", () => {
  const cases = {
    "": "empty",
    "ann": "oneAt",
    "ann@@example.com": "oneAt",
    "@example.com": "local",
    "ann@example": "domain",
    "ann@.example.com": "domain",
    "ann @example.com": "spaces",
    '"ann"@example.com': "spaces",
    [`${"a".repeat(250)}@example.com`]: "tooLong",
  };
  for (const [value, expected] of Object.entries(cases)) {
    assert.equal(emailProblem(value), expected, JSON.stringify(value));
  }
});
