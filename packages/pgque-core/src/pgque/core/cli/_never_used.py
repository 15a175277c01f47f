"""A read command that found nothing says so when the queue has never been used, so that a
typo'd queue name is not taken for an empty queue: the line names the queues there."""

from __future__ import annotations

from pgque.core.cli._config import Config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._errors import CliError
from pgque.core.contract import Transport
from pgque.core.explain import never_used

__all__ = ["never_used_sentence", "refuse_never_used", "MEMORY_NOTE"]

#: What a "never used" sentence adds for a memory:// URL: every command has a store of its own.
MEMORY_NOTE = " (a memory:// queue lives only in the process that opened it)"


def never_used_sentence(transport: Transport, config: Config) -> str | None:
    """Return the sentence of :func:`~pgque.core.explain.never_used` for *transport*'s queue
    (with a note on memory:// URLs), or None when the queue has been used or the transport
    cannot list its queues. Raises what the transport raises."""
    sentence = retrying(lambda: never_used(transport, where=config.masked_url), "stats")
    if sentence is not None and config.scheme == "memory":
        sentence += MEMORY_NOTE
    return sentence


def refuse_never_used(transport: Transport, config: Config) -> None:
    """Raise CliError (exit 1) when *transport*'s queue has never been used.

    A read command calls it when it found nothing, so that a typo'd queue name is not taken
    for an empty queue: the line names the queues there.
    """
    sentence = never_used_sentence(transport, config)
    if sentence is not None:
        raise CliError(sentence)
