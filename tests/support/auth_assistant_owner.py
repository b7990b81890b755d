"""Each user owns the assistants they create and a store namespace of their own (and their threads): the
handlers docs/serving.md shows for assistants and the store, written as for LangGraph's server."""

from langgraph_sdk import Auth

auth = Auth()

USERS = {"token-alice": "alice", "token-bob": "bob"}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or invalid token")
    return {"identity": USERS[token]}


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def own_assistants(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    """What a user creates is marked theirs and stays theirs (an update naming another owner is refused); every
    other action sees only theirs."""
    if ctx.action == "create":
        value.setdefault("metadata", {})["owner"] = ctx.user.identity
    elif ctx.action == "update" and (value.get("metadata") or {}).get("owner", ctx.user.identity) != ctx.user.identity:
        raise Auth.exceptions.HTTPException(status_code=403, detail="an assistant's owner cannot be changed")
    return {"owner": ctx.user.identity}


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: dict) -> None:
    """Every namespace a user names is under their identity."""
    value["namespace"] = (ctx.user.identity, *(value.get("namespace") or ()))
