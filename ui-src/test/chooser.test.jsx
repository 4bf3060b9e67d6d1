import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { Chooser } from "../chooser/Chooser.jsx";
import { chooserText } from "./texts.js";

afterEach(cleanup);

const base = "http://localhost/auth";
const provider = (id, name, type = "oidc") => ({
  id, name, type, signinUrl: `${base}/signin/${id}`, callbackUrl: `${base}/callback/${id}`,
});
const many = [
  provider("github", "GitHub", "oauth"), provider("google", "Google"), provider("gitlab", "GitLab"),
  provider("okta", "Okta"), provider("slack", "Slack"), provider("discord", "Discord", "oauth"),
  provider("email", "Email", "email"), provider("demo", "Demo", "credentials"),
];
const page = {
  authBase: "/auth", callbackUrl: "/account", email: "", error: null,
  logos: { github: "/static/logos/github.svg" },
  credentials: { demo: { fields: [{ name: "email", label: "E-mail", type: "email" }, { name: "password", label: "Password", type: "password" }], demo: true } },
  text: chooserText,
};

function renderChooser(props = {}) {
  return render(<Chooser providers={many} csrfToken="tok" page={page} {...props} />);
}

const providerButtons = () => within(document.getElementById("provider-list")).getAllByRole("button");

test("more than five providers get a filter box that narrows the buttons", () => {
  renderChooser();
  const filter = screen.getByLabelText("Find your sign-in provider");
  assert.equal(providerButtons().length, 6);
  fireEvent.change(filter, { target: { value: "git" } });
  assert.deepEqual(providerButtons().map((b) => b.dataset.provider), ["github", "gitlab"]);
  assert.ok(screen.getByText("Showing 2 of 6"));
  fireEvent.change(filter, { target: { value: "nothing" } });
  assert.ok(screen.getByText(/No provider matches/));
  fireEvent.keyDown(filter, { key: "Escape" });
  assert.equal(providerButtons().length, 6);
});

test("five providers or fewer get no filter box", () => {
  render(<Chooser providers={many.slice(0, 5)} csrfToken="tok" page={page} />);
  assert.equal(screen.queryByLabelText("Find your sign-in provider"), null);
});

test("the provider of this browser's last sign-in that worked is offered first", () => {
  renderChooser({ page: { ...page, lastUsed: { id: "slack", name: "Slack" } } });
  const first = providerButtons()[0];
  assert.equal(first.dataset.provider, "slack");
  assert.match(first.textContent, /Continue with Slack/);
  assert.match(first.textContent, /last used/);
});

test("arrow keys move between provider buttons, starting from the filter box", () => {
  renderChooser();
  const filter = screen.getByLabelText("Find your sign-in provider");
  filter.focus();
  fireEvent.keyDown(filter, { key: "ArrowDown" });
  assert.equal(document.activeElement.dataset.provider, "github");
  fireEvent.keyDown(document.activeElement, { key: "ArrowDown" });
  assert.equal(document.activeElement.dataset.provider, "google");
  fireEvent.keyDown(document.activeElement, { key: "ArrowUp" });
  assert.equal(document.activeElement.dataset.provider, "github");
});

test("every form carries the csrf token and callbackUrl, and posts to the provider's URL", () => {
  const { container } = renderChooser();
  const forms = [...container.querySelectorAll("form")];
  assert.equal(forms.length, 8);
  for (const form of forms) {
    assert.equal(form.elements.csrfToken.value, "tok");
    assert.equal(form.elements.callbackUrl.value, "/account");
  }
  assert.equal(forms.at(-1).getAttribute("action"), `${base}/callback/demo`);
  assert.ok(container.querySelector('img[src="/static/logos/github.svg"]'));
});

test("a submit marks the provider pending, disables every button and blocks a second submit", () => {
  renderChooser();
  const github = providerButtons()[0];
  const first = fireEvent.submit(github.form);
  assert.equal(first, true, "the first submit goes ahead");
  assert.match(github.textContent, /Redirecting to GitHub/);
  for (const button of screen.getAllByRole("button")) assert.equal(button.disabled, true);
  const second = fireEvent.submit(providerButtons()[1].form);
  assert.equal(second, false, "the second submit is cancelled");
  // An attempt is not a sign-in: nothing becomes "last used" (the server says so once one works).
  assert.equal(document.querySelector(".badge"), null);
  assert.equal(localStorage.length, 0);
});

test("an invalid e-mail address is explained inline and not sent", () => {
  const sent = [];
  renderChooser({ submitInPlace: (form) => { sent.push(form); return Promise.resolve(); } });
  const input = screen.getByLabelText("E-mail address");
  fireEvent.change(input, { target: { value: "ann@example" } });
  const allowed = fireEvent.submit(input.form);
  assert.equal(allowed, false);
  assert.equal(sent.length, 0);
  assert.equal(input.getAttribute("aria-invalid"), "true");
  const message = document.getElementById(input.getAttribute("aria-describedby"));
  assert.match(message.textContent, /after the @/);
  fireEvent.change(input, { target: { value: "ann@example.com" } });
  assert.equal(input.getAttribute("aria-invalid"), "false");
});

test("a valid e-mail address is sent in place (htmx) with the pending state", () => {
  const sent = [];
  renderChooser({ submitInPlace: (form) => { sent.push(form); return new Promise(() => {}); } });
  const input = screen.getByLabelText("E-mail address");
  fireEvent.change(input, { target: { value: "ann@example.com" } });
  fireEvent.submit(input.form);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].elements.email.value, "ann@example.com");
  assert.ok(screen.getByText("Sending your link…"));
});

test("the ?error= message is shown in an alert region", async () => {
  const error = { code: "OAuthSignin", title: "Could not reach", message: "It may be down.", action: "Try again." };
  renderChooser({ page: { ...page, error } });
  const alert = await screen.findByRole("alert");
  assert.equal(alert.dataset.errorCode, "OAuthSignin");
  assert.match(alert.textContent, /Could not reach/);
  assert.match(alert.textContent, /Try again\./);
});

test("what was typed into the server's forms before mounting is kept", () => {
  const typed = { "email-email": "ann@example.com", "demo-email": "bob@example.com", "demo-password": "demo" };
  renderChooser({ page: { ...page, email: "prefill@example.com", typed } });
  assert.equal(screen.getByLabelText("E-mail address").value, "ann@example.com");
  assert.equal(screen.getByLabelText("E-mail").value, "bob@example.com");
  assert.equal(screen.getByLabelText("Password").value, "demo");
});

test("every word comes from the page's data, in the page's language", () => {
  const de = {
    ...chooserText,
    filterLabel: "Anbieter suchen",
    providerCount: "6 Anbieter",
    signInWith: "Mit {name} anmelden",
    emailLabel: "E-Mail-Adresse",
    or: "oder",
    demoTitle: "Nur in der Entwicklung:",
    demoNote: "Jede E-Mail-Adresse mit dem Passwort {password} meldet an.",
  };
  const { container } = renderChooser({ page: { ...page, text: de } });
  assert.ok(screen.getByLabelText("Anbieter suchen"));
  assert.ok(screen.getByText("6 Anbieter"));
  assert.match(providerButtons()[0].textContent, /^Mit GitHub anmelden$/);
  assert.ok(screen.getByLabelText("E-Mail-Adresse"));
  assert.equal(screen.getAllByText("oder").length, 2);
  const note = container.querySelector(".note");
  assert.equal(note.textContent, "Nur in der Entwicklung: Jede E-Mail-Adresse mit dem Passwort demo meldet an.");
  assert.equal(note.querySelector("code").textContent, "demo");
  assert.doesNotMatch(container.textContent, /Sign in|E-mail address|providers/);
});

// -- passkeys -------------------------------------------------------------------------

class FakeProblem extends Error {}

/** Stand-in ceremonies (ui-src/passkey/ceremony.js): record calls, answer as told. */
function fakePasskeys({ supported = true, autofill = false, signIn } = {}) {
  const calls = { signIn: [], went: [] };
  return {
    calls,
    passkeysSupported: () => supported,
    autofillSupported: async () => autofill,
    signInWithPasskey: (request) => {
      calls.signIn.push(request);
      return signIn ? signIn(request) : new Promise(() => {});
    },
    problemMessage: (error) => (error.name === "NotAllowedError" ? "No passkey was used." : "Something went wrong."),
    PasskeyProblem: FakeProblem,
    go: (url) => calls.went.push(url),
  };
}

const withPasskey = [...many.slice(6), provider("passkey", "Passkey", "webauthn")];

test("a passkey button signs in and goes where the server says", async () => {
  const passkeys = fakePasskeys({ signIn: async () => "http://localhost/account" });
  render(<Chooser providers={withPasskey} csrfToken="tok" page={page} passkeys={passkeys} />);
  fireEvent.click(screen.getByRole("button", { name: "Sign in with a passkey" }));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(passkeys.calls.signIn, [{ authBase: "/auth", csrfToken: "tok", callbackUrl: "/account", text: chooserText.passkey }]);
  assert.deepEqual(passkeys.calls.went, ["http://localhost/account"]);
  // The passkey is not a form of its own, and the e-mail fields offer passkeys as suggestions.
  assert.equal(document.querySelectorAll("form").length, 2);
  assert.equal(screen.getByLabelText("E-mail address").getAttribute("autocomplete"), "email webauthn");
  assert.equal(screen.getByLabelText("E-mail").getAttribute("autocomplete"), "username webauthn");
});

test("a cancelled passkey dialog leaves the page usable, with a short message", async () => {
  const cancelled = Object.assign(new Error("cancelled"), { name: "NotAllowedError" });
  const passkeys = fakePasskeys({ signIn: async () => { throw cancelled; } });
  render(<Chooser providers={withPasskey} csrfToken="tok" page={page} passkeys={passkeys} />);
  const button = screen.getByRole("button", { name: "Sign in with a passkey" });
  fireEvent.click(button);
  const alert = await screen.findByText("No passkey was used.");
  assert.equal(alert.getAttribute("role"), "alert");
  assert.equal(button.getAttribute("aria-describedby"), alert.id);
  for (const b of screen.getAllByRole("button")) assert.equal(b.disabled, false);
  assert.deepEqual(passkeys.calls.went, []);
});

test("conditional UI waits for a passkey picked from the e-mail field's suggestions", async () => {
  const passkeys = fakePasskeys({ autofill: true, signIn: async () => "http://localhost/" });
  render(<Chooser providers={withPasskey} csrfToken="tok" page={page} passkeys={passkeys} />);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(passkeys.calls.signIn.length, 1);
  assert.equal(passkeys.calls.signIn[0].autofill, true);
  assert.deepEqual(passkeys.calls.went, ["http://localhost/"]);
});

test("no passkey button where passkeys cannot work", () => {
  const unsupported = fakePasskeys({ supported: false });
  const { unmount } = render(<Chooser providers={withPasskey} csrfToken="tok" page={page} passkeys={unsupported} />);
  assert.equal(screen.queryByRole("button", { name: "Sign in with a passkey" }), null);
  assert.equal(screen.getByLabelText("E-mail address").getAttribute("autocomplete"), "email");
  unmount();
  const hint = "Passkeys need a domain name, e.g. http://localhost:5000";
  render(<Chooser providers={withPasskey} csrfToken="tok" page={{ ...page, passkeyProblem: hint }} passkeys={fakePasskeys()} />);
  assert.equal(screen.queryByRole("button", { name: "Sign in with a passkey" }), null);
  assert.ok(screen.getByText(hint));
});
