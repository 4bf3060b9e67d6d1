"""A short, human description of the device behind a user agent."""

from __future__ import annotations

from user_agents import parse


def describe_device(user_agent: str | None, *, version: bool = True) -> str:
    """Return e.g. "Chrome 156 on Linux" or "Safari on iPhone"; "Unknown device" if unknown.

    ``version=False`` leaves the browser's version out ("Chrome on Linux"): the same
    device after a browser update, as the audit trail and its "new device" check see it.
    """
    if not user_agent:
        return "Unknown device"
    agent = parse(user_agent)
    browser = str(agent.browser.family)
    if browser == "Other":
        return "Unknown device"
    major = agent.browser.version_string.split(".")[0]
    if major and version:
        browser = f"{browser} {major}"
    # A phone or tablet is better named by the device ("iPhone"), a computer by its OS.
    where = str(agent.device.family if agent.is_mobile or agent.is_tablet else agent.os.family)
    if not where or where == "Other":
        return browser
    return f"{browser} on {where}"
