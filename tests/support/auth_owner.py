"""The worked example of docs/security.md: each user sees and runs only the threads they created.

Written exactly as for LangGraph's server (a `langgraph_sdk.Auth`), so the same file serves `langgraph dev`
and `reactgraph serve` (tests/test_auth_compare.py holds them to the same answers). Tokens are fixed here for
the tests; a real one would verify a JWT or ask an identity provider.
"""

from langgraph_sdk import Auth

auth = Auth()

# token → (identity, permissions); carol may read but not write
USERS = {"token-alice": ("alice", ["threads:write"]), "token-bob": ("bob", ["threads:write"]),
         "token-carol": ("carol", [])}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or invalid token")
    identity, permissions = USERS[token]
    return {"identity": identity, "permissions": permissions}


@auth.on.threads
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    """Every thread action is limited to the caller's threads; what they create or run is marked theirs."""
    if ctx.action in ("create", "create_run", "update", "delete") and "threads:write" not in ctx.permissions:
        return False
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):  # on create, the thread's (or run's) metadata; on search, what is searched
        metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def anyone_reads_assistants(ctx: Auth.types.AuthContext, value: dict) -> None:
    return None
