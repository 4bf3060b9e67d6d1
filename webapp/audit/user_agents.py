"""A short, human description of the device behind a user agent.

The patterns are ua-parser's (the uap-core project's regexes). Whether a phone or tablet is
named by its device rather than its system follows the rules of ``user-agents``, the
library this module used before: the names the trail and the sessions list keep stay the
same across that change.
"""

from __future__ import annotations

from functools import lru_cache

from ua_parser import DefaultedResult, parse

from webapp.i18n import gettext

#: The most of a user agent that is parsed (``Settings.user_agent_max_length``'s default).
USER_AGENT_PARSED = 512


#: Devices, browsers and systems that make a phone or a tablet (``user-agents``' lists).
_HANDHELD_DEVICES = frozenset(
    {
        "iPhone",
        "iPod",
        "Generic Smartphone",
        "Generic Feature Phone",
        "PlayStation Vita",
        "iOS-Device",
        "iPad",
        "BlackBerry Playbook",
        "Blackberry Playbook",
        "Kindle",
        "Kindle Fire",
        "Kindle Fire HD",
        "Galaxy Tab",
        "Xoom",
        "Dell Streak",
    }
)
_MOBILE_BROWSERS = frozenset(
    {
        "IE Mobile",
        "Opera Mobile",
        "Opera Mini",
        "Chrome Mobile",
        "Chrome Mobile WebView",
        "Chrome Mobile iOS",
    }
)
_HANDHELD_SYSTEMS = frozenset(
    {
        "Android",
        "Firefox OS",
        "BlackBerry OS",
        "Windows Phone",
        "Windows Phone OS",
        "Symbian OS",
        "Bada",
        "Windows CE",
        "Windows Mobile",
        "Maemo",
    }
)
#: Words in the user agent itself that make a phone: old Java phones and mobile crawlers.
_HANDHELD_MARKS = ("J2ME", "MIDP", "iPhone;", "Googlebot-Mobile")


@lru_cache(maxsize=256)
def _browser_and_system(user_agent: str | None, *, version: bool) -> tuple[str, str] | None:
    """The browser ("Chrome 156", or "Chrome" without ``version``) and where it runs ("" if
    unknown); None for no user agent or an unknown browser.

    Remembered for the last agents seen: a person's sessions and a site's visitors use a
    few browsers, and the account page lists every session's (bounded, since any client
    can send any agent)."""
    if not user_agent:
        return None
    # Cut as a session row keeps it: the parser's ~1,300 patterns cost time per character,
    # and a client chooses the length.
    agent = user_agent[:USER_AGENT_PARSED]
    parsed = parse(agent).with_defaults()
    browser = parsed.user_agent.family
    if browser == "Other":
        return None
    major = _major(parsed.user_agent.major)
    if major and version:
        browser = f"{browser} {major}"
    # A phone or tablet is better named by the device ("iPhone"), a computer by its OS.
    where = parsed.device.family if _is_handheld(agent, parsed) else parsed.os.family
    return browser, "" if where == "Other" else where


def _major(major: str | None) -> str:
    """The major version as shown: a number without leading zeros ("05" is 5)."""
    if major is None:
        return ""
    return str(int(major)) if major.isdigit() else major.split(".")[0]


def _is_handheld(agent: str, parsed: DefaultedResult) -> bool:
    """Whether the agent is a phone or a tablet (``user-agents``' ``is_mobile or
    is_tablet``)."""
    device, browser, system = parsed.device.family, parsed.user_agent.family, parsed.os.family
    return (
        device in _HANDHELD_DEVICES
        or browser in _MOBILE_BROWSERS
        or system in _HANDHELD_SYSTEMS
        # Windows RT: a tablet.
        or (system == "Windows" and (parsed.os.major or "").startswith("RT"))
        or (device == "Spider" and "Mobile" in browser)
        or any(mark in agent for mark in _HANDHELD_MARKS)
        or ("NokiaBrowser" in agent and "Mobile" in agent)
    )


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
