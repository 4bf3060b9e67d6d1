"""A short, human description of the device behind a user agent."""

from __future__ import annotations

from functools import lru_cache

from user_agents import parse

from webapp.i18n import gettext

#: The most of a user agent that is parsed (``Settings.user_agent_max_length``'s default).
USER_AGENT_PARSED = 512


@lru_cache(maxsize=256)
def _browser_and_system(user_agent: str | None, *, version: bool) -> tuple[str, str] | None:
    """The browser ("Chrome 156", or "Chrome" without ``version``) and where it runs ("" if
    unknown); None for no user agent or an unknown browser.

    Remembered for the last agents seen: a person's sessions and a site's visitors use a
    few browsers, and the account page lists every session's (bounded, since any client
    can send any agent)."""
    if not user_agent:
        return None
    # Cut as a session row keeps it: the parser's ~1,300 patterns cost about 15 µs per
    # character, and a client chooses the length.
    agent = parse(user_agent[:USER_AGENT_PARSED])
    browser = str(agent.browser.family)
    if browser == "Other":
        return None
    major = agent.browser.version_string.split(".")[0]
    if major and version:
        browser = f"{browser} {major}"
    # A phone or tablet is better named by the device ("iPhone"), a computer by its OS.
    where = str(agent.device.family if agent.is_mobile or agent.is_tablet else agent.os.family)
    return browser, "" if where == "Other" else where


def describe_device(user_agent: str | None) -> str:
    """Return e.g. "Chrome 156 on Linux" or "Safari on iPhone"; "Unknown device" if unknown
    (in the request's language; the browser's and the system's names are names)."""
    found = _browser_and_system(user_agent, version=True)
    if found is None:
        return gettext("Unknown device")
    browser, where = found
    return gettext("%(browser)s on %(system)s", browser=browser, system=where) if where else browser


def device_label(user_agent: str | None) -> str:
    """The device as records keep it, in no one's language and without the browser's
    version: "Chrome on Linux", the same after a browser update and whoever reads it (the
    audit trail and its "new device" check compare these)."""
    found = _browser_and_system(user_agent, version=False)
    if found is None:
        return "Unknown device"
    browser, where = found
    return f"{browser} on {where}" if where else browser
