"""Fuzz the blocking Redis transport against the reference model with hostile inputs."""

from __future__ import annotations

from pgque.conformance.fuzz import *  # noqa: F403
