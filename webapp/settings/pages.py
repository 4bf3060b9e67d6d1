"""How the pages present the product: its name, logo and colour, and their default language.

The brand may also be a TOML table (``[auth.brand]``); the environment wins key by key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webapp.settings.model import Brand, ConfigError, Settings
from webapp.settings.parsers import opt_str
from webapp.settings.sources import Sources


def read_pages(sources: Sources) -> dict[str, Any]:
    get = sources.get
    brand_table = sources.auth.get("brand", {})
    if not isinstance(brand_table, Mapping):
        raise ConfigError("[auth.brand] must be a table")
    brand = Brand(
        name=str(get("AUTH_BRAND_NAME") or brand_table.get("name") or Brand.name),
        logo=opt_str(get("AUTH_BRAND_LOGO") or brand_table.get("logo")),
        color=str(get("AUTH_BRAND_COLOR") or brand_table.get("color") or Brand.color),
    )
    if not re.fullmatch(r"#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?", brand.color):
        raise ConfigError(
            f"AUTH_BRAND_COLOR must be a hex colour like #2f5fd0; got {brand.color!r}"
        )
    return {
        "brand": brand,
        "default_locale": opt_str(get("AUTH_DEFAULT_LOCALE", "default_locale"))
        or Settings.default_locale,
    }
