"""An application that adds the sign-in facility: its own pages, ours under /auth.

Run it: ``flask --app examples/host/app.py auth migrate``, then ``flask --app
examples/host/app.py run``, with the settings (AUTH_URL, AUTH_SECRET, DATABASE_URL,
EMAIL_SERVER, EMAIL_FROM, …) in the environment.
"""

import os

from flask import Flask, render_template
from flask_login import current_user, login_required

from webapp.auth import Auth

app = Flask(__name__)
Auth(app, environ=os.environ)


@app.get("/")
def home() -> str:
    return render_template("home.html", user=current_user)


@app.get("/reports")
@login_required
def reports() -> str:
    return render_template("reports.html", user=current_user)
