"""Queue URLs: parsing options and masking secrets."""

from __future__ import annotations

import pytest

from pgque.core import ConfigurationError, mask_url
from pgque.core.urls import mask_dsn, parse_url, url_password


def test_parse_url_splits_scheme_location_and_options() -> None:
    parsed = parse_url("PostgreSQL://user:pw@db.example:5432/app?queue=orders&max_attempts=3")
    assert parsed.scheme == "postgresql"
    assert parsed.netloc_and_path == "user:pw@db.example:5432/app"
    assert parsed.options == {"queue": "orders", "max_attempts": "3"}


@pytest.mark.parametrize(
    ("url", "location"),
    [("memory://", ""), ("memory://shared", "shared"), ("memory:///a/b/", "a/b")],
)
def test_parse_memory_urls(url: str, location: str) -> None:
    parsed = parse_url(url)
    assert (parsed.scheme, parsed.netloc_and_path, parsed.options) == ("memory", location, {})


def test_parse_url_keeps_blank_options() -> None:
    assert parse_url("redis://h/0?queue=").options == {"queue": ""}


def test_parse_url_refuses_repeated_option() -> None:
    with pytest.raises(ConfigurationError, match="given twice"):
        parse_url("memory://?queue=a&queue=b")


@pytest.mark.parametrize("url", ["", "memory", "localhost:5432", "/tmp/socket"])
def test_parse_url_needs_a_scheme(url: str) -> None:
    with pytest.raises(ConfigurationError, match="scheme"):
        parse_url(url)


def test_parse_url_error_masks_the_password() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_url("postgresql://u:hunter2@h/db?queue=a&queue=b")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("redis://:secret@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://u:p:w@h/0", "rediss://u:***@h/0"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("memory://", "memory://"),
        (
            "postgresql://h/db?password=secret&queue=q",
            "postgresql://h/db?password=***&queue=q",
        ),
        ("postgresql://h/db?sslpassword=x", "postgresql://h/db?sslpassword=***"),
        ("unix:///run/redis.sock?password=secret&db=1", "unix:///run/redis.sock?password=***&db=1"),
        ("memory://?password=secret", "memory://?password=***"),
        # a URL inside an option (listen_url=) has its password hidden too, however encoded
        (
            "postgresql://u:secret@h/db?listen_url=postgresql%3A%2F%2Fu%3Asecret%40d%2Fdb&queue=q",
            "postgresql://u:***@h/db?listen_url=postgresql://u:***@d/db&queue=q",
        ),
        (
            "postgresql://h/db?listen_url=postgresql://u:secret@d/db",
            "postgresql://h/db?listen_url=postgresql://u:***@d/db",
        ),
        (
            "postgresql://h/db?listen_url=postgresql%3A%2F%2Fd%2Fdb%3Fpassword%3Dsecret",
            "postgresql://h/db?listen_url=postgresql://d/db?password=***",
        ),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert "secret" not in mask_url(url)


def test_mask_url_of_garbage_does_not_raise() -> None:
    assert mask_url("http://[::1") == "<unparseable url>"


@pytest.mark.parametrize(
    ("dsn", "masked"),
    [
        ("postgresql://u:s3cret@h/db", "postgresql://u:***@h/db"),
        ("host=h password=s3cret dbname=db", "host=h password=*** dbname=db"),
        ("host=h password = 'a b\\' c' dbname=db", "host=h password = *** dbname=db"),
        ("host=h dbname=db", "host=h dbname=db"),
    ],
)
def test_mask_dsn_hides_a_password_in_either_form(dsn: str, masked: str) -> None:
    assert mask_dsn(dsn) == masked


def test_url_password_is_the_decoded_password_of_a_url_only() -> None:
    assert url_password("postgresql://u:p%40ss@h/db") == "p@ss"
    assert url_password("postgresql://u@h/db") is None
    assert url_password("host=h password=x") is None
    assert url_password("postgresql://u:p@[::1/db") is None  # unparseable
