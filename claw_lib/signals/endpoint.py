"""An OpenAI-compatible endpoint (vLLM, SGLang, another ``claw serve``, a hosted API), opened and checked once
(notebook 06): the reviser's LM (:class:`~claw_lib.signals.reviser_lm.RemoteLM`, ``claw rewards --reviser URL``) and
the URL judge (:class:`~claw_lib.signals.judges.RemoteJudge`, ``claw train --judge URL``, ``claw serve --judge URL``)
both start here, so an endpoint that cannot be reached is refused before any work, in one line.
"""
from __future__ import annotations

from typing import Tuple

__all__ = ["open_endpoint"]


def open_endpoint(url: str, model: str = "", timeout_s: float = 120.0, what: str = "reviser") -> Tuple[object, str]:
    """(an ``openai.OpenAI`` client on ``url``, the model to ask for). url: ``http://host:port`` with or without
    ``/v1``; model: the name to ask for (empty: the first one ``GET /v1/models`` lists). The endpoint is asked for
    ``/v1/models`` here, once: one that does not answer (nothing listens, not an OpenAI-compatible server, an empty
    model list) is refused with a one-line ValueError naming ``what`` ("reviser", "judge") and the URL."""
    import openai  # lazy: openai (with httpx and pydantic) loads only when a URL is named

    base = url.rstrip("/")
    client = openai.OpenAI(base_url=base if base.endswith("/v1") else base + "/v1", api_key="none", timeout=timeout_s,
                           max_retries=1)
    try:
        listed = client.models.list().data[0].id
    except Exception as e:  # openai's connection / status errors, or an empty model list
        raise ValueError(f"the {what} endpoint {url} does not answer /v1/models ({type(e).__name__}); is the "
                         "server running?") from None
    return client, model or listed
