"""Users and Applications from config.json; run at every start, so a restart (the key
rotation) finds them as configured.

Each user has the password ``config["password"]``; ``verified`` puts them in the
``email-verified`` group. Each Application is one client of the app under test: DOT ties
one grant type to an Application, so a code-flow client and a device client are two.
Client secrets are stored hashed (DOT's default, ``hash_client_secret``). ``algorithm`` is
RS256: DOT then signs its ID tokens with ``OIDC_RSA_PRIVATE_KEY`` (the default, no
algorithm, issues no ID token at all).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User
from oauth2_provider.models import get_application_model

from .validators import VERIFIED_GROUP


def seed(config: dict[str, Any]) -> None:
    verified, _ = Group.objects.get_or_create(name=VERIFIED_GROUP)
    owner = None
    for person in config["users"]:
        user, _ = User.objects.get_or_create(username=person["username"])
        user.email = person.get("email") or ""
        user.first_name = person.get("name") or ""
        user.set_password(config["password"])
        user.save()
        if person.get("verified"):
            user.groups.add(verified)
        else:
            user.groups.remove(verified)
        owner = owner or user
    application_model = get_application_model()
    for client in config["applications"]:
        fields = {
            "name": client["name"],
            "user": owner,
            "client_type": client["client_type"],
            "authorization_grant_type": client["grant_type"],
            "redirect_uris": " ".join(client.get("redirect_uris", [])),
            "post_logout_redirect_uris": " ".join(client.get("post_logout_redirect_uris", [])),
            "skip_authorization": client.get("skip_authorization", True),
            "algorithm": "RS256",
        }
        if client.get("secret"):
            fields["client_secret"] = client["secret"]
        application_model.objects.update_or_create(client_id=client["client_id"], defaults=fields)
