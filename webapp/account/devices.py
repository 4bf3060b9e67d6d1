"""A short, human description of the device behind a session's user agent."""

from __future__ import annotations

from user_agents import parse

from webapp.i18n import gettext


def describe_device(user_agent: str | None) -> str:
    """Return e.g. "Chrome 156 on Linux" or "Safari on iPhone"; "Unknown device" if unknown
    (in the request's language; the browser's and the system's names are names)."""
    if not user_agent:
        return gettext("Unknown device")
    agent = parse(user_agent)
    browser = str(agent.browser.family)
    if browser == "Other":
        return gettext("Unknown device")
    major = agent.browser.version_string.split(".")[0]
    if major:
        browser = f"{browser} {major}"
    # A phone or tablet is better named by the device ("iPhone"), a computer by its OS.
    where = str(agent.device.family if agent.is_mobile or agent.is_tablet else agent.os.family)
    if not where or where == "Other":
        return browser
    return gettext("%(browser)s on %(system)s", browser=browser, system=where)
