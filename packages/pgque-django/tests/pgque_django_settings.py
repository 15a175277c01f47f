"""The Django settings of pgque-django's tests: the database is ``PGQUE_DJANGO_TEST_URL`` (a
database of its own, made by conftest.py), the queue ``PGQUE_DJANGO_TEST_QUEUE``."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_url = conninfo_to_dict(os.environ["PGQUE_DJANGO_TEST_URL"])

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = ["pgque.django", "pgque_django_testapp"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": str(_url["dbname"]),
        "USER": str(_url.get("user", "")),
        "PASSWORD": str(_url.get("password", "")),
        "HOST": str(_url.get("host", "")),
        "PORT": str(_url.get("port", "")),
    },
    # A database that is not PostgreSQL: the queue cannot live there, and migrating it leaves
    # pgque's migration without effect.
    "other": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}
PGQUE = {"QUEUE": os.environ["PGQUE_DJANGO_TEST_QUEUE"], "OPTIONS": {"max_size": 4}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
