"""modelgate: a Python client for the modelgate model registry (standard library only).

    import modelgate
    mg = modelgate.Client()          # MODELGATE_URL / MODELGATE_TOKEN or `modelgate login`
    v = mg.push("fraud", "out/", metrics={"auc": 0.94}, create_model=True)
"""

from ._client import Client, Promotion, Pulled, Version
from ._errors import (APIError, ConfigError, Conflict, Forbidden, Gone, IntegrityError,
                      InvalidArgument, ModelgateError, NotFound, PackError, PayloadTooLarge,
                      PromotionFailed, QuotaExceeded, ServerError, TransportError,
                      Unauthenticated, WaitTimeout)
from ._tar import digest_tree as _digest_tree

__version__ = "0.1.0"


def tree_digest(path: str) -> str:
    """The digest `modelgate push` and Client.push give the directory at path."""
    return _digest_tree(path)[0]


__all__ = [
    "Client", "Promotion", "Pulled", "Version", "tree_digest",
    "ModelgateError", "APIError", "InvalidArgument", "Unauthenticated", "Forbidden",
    "NotFound", "Gone", "Conflict", "PayloadTooLarge", "QuotaExceeded", "ServerError",
    "TransportError", "IntegrityError", "PackError", "ConfigError", "WaitTimeout",
    "PromotionFailed", "__version__",
]
