import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { ErrorPage } from "../error-page/ErrorPage.jsx";
import { errorPageText } from "./texts.js";

afterEach(cleanup);

const view = {
  code: "Verification",
  title: "This sign-in link no longer works",
  message: "The link has expired.",
  action: "Request a new link from the sign-in page.",
  steps: [{ label: "Request a new sign-in link", href: "/auth/signin" }, { label: "Go to the home page", href: "/" }],
  retry: true,
  requestId: "req-1234abcd",
  text: errorPageText,
};

test("renders what happened, what to do next and the reference", () => {
  render(<ErrorPage view={view} />);
  assert.equal(screen.getByRole("heading", { level: 1 }).textContent, view.title);
  const links = screen.getAllByRole("link");
  assert.deepEqual(links.map((a) => [a.textContent, a.getAttribute("href")]), [
    ["Request a new sign-in link", "/auth/signin"], ["Go to the home page", "/"],
  ]);
  assert.ok(screen.getByText("req-1234abcd"));
  assert.equal(screen.queryByRole("button"), null, "no copy button without a clipboard");
});

test("names the provider of this browser's last sign-in that worked", () => {
  render(<ErrorPage view={{ ...view, lastUsed: "GitHub" }} />);
  assert.ok(screen.getByText("Last time you signed in here with GitHub."));
});

test("copies the reference and says so", async () => {
  const copied = [];
  const clipboard = { writeText: async (text) => { copied.push(text); } };
  render(<ErrorPage view={view} clipboard={clipboard} />);
  await act(async () => fireEvent.click(screen.getByRole("button", { name: "Copy reference" })));
  assert.deepEqual(copied, ["req-1234abcd"]);
  assert.ok(screen.getByText("Reference copied."));
});

test("says the reference in the page's language, the values in place", () => {
  const text = { ...errorPageText, referenceAndCode: "مرجع: {reference} · الرمز {code}", lastUsed: "آخر مرة: {name}." };
  const { container } = render(<ErrorPage view={{ ...view, text, lastUsed: "GitHub" }} />);
  const reference = container.querySelector(".reference");
  assert.equal(reference.textContent, "مرجع: req-1234abcd · الرمز Verification");
  assert.deepEqual([...reference.querySelectorAll("code")].map((c) => c.textContent), ["req-1234abcd", "Verification"]);
  assert.ok(screen.getByText("آخر مرة: GitHub."));
});
