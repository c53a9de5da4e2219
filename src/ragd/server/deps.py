"""What every route is given: the library (`Rag`), the caller's tenant from the API key (`Tenant`), and the
parameter types shared by routes (names, ids, a document's reference in a path, collections, versions).

The tenant comes from the API key (`Authorization: Bearer ragd_...`), never from the body: a body `tenant_id`
that differs from the key's is refused. A server whose database holds no active key runs open (each request
names its tenant, seed 001's V1), which `ragd serve` allows on loopback only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, File, Query, Request, UploadFile
from fastapi import Path as PathParam
from pydantic import BaseModel, BeforeValidator, ConfigDict
from starlette.convertors import Convertor, register_url_convertor

from .. import keys
from ..engine import Ragd
from .errors import ApiError

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"  # collection names (the schema's CHECK)
TEXT = r"^[^\x00]*$"  # PostgreSQL's text holds no NUL: a string holding one is refused (400), never stored changed
UUID = r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"
Id = Annotated[str, PathParam(pattern=UUID, description="A UUID")]


class DocumentRef(Convertor[str]):
    """A document's external id in a path: any characters, slashes too, except that a path ending in /source,
    /blocks or /pages/N.png names that view of the document (a document whose id ends so is reached by its doc
    id)."""

    regex = r"(?:(?!/source$|/blocks$|/pages/[0-9]+\.png$).)+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("docref", DocumentRef())
Files = Annotated[list[UploadFile], File(description="One or more files, any supported format", min_length=1)]
Ref = Annotated[str, PathParam(pattern=r"^[^\x00]+$", max_length=4096,
                               description="A document's external id or doc id")]
VersionParam = Annotated[str | None, Query(max_length=128, pattern=TEXT,
                                          description="A version id or label (default: the active one)")]
CollectionParam = Annotated[str | None, Query(pattern=NAME, max_length=128,
                                              description="The collection (default: RAGD_COLLECTION)")]


def _integral(value: Any) -> Any:
    """JSON Schema's integers include 1.0; strict pydantic does not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Int = Annotated[int, BeforeValidator(_integral)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: `false` is not a number


# -- who asks: the library and the API key's tenant -------------------------------------------------------------------

def rag(request: Request) -> Ragd:
    return request.app.state.rag  # type: ignore[no-any-return]


def tenant(request: Request) -> str:
    """The tenant of the request's API key; with no keys at all, the configured tenant (open mode)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not request.app.state.keyed:  # open until the first key exists, then keyed for good
        request.app.state.keyed = keys.keyed(rag(request).store, rag(request).settings.allow_open)
    if not request.app.state.keyed:
        return rag(request).settings.tenant
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "an API key is required: Authorization: Bearer <key>",
                       {"WWW-Authenticate": 'Bearer realm="ragd"'})
    r = rag(request)
    caller = keys.authenticate(r.store, token.strip(), r.settings.rate_limit_per_minute)
    if caller is None:
        raise ApiError(401, "unauthorized", "the API key is unknown or revoked",
                       {"WWW-Authenticate": 'Bearer realm="ragd", error="invalid_token"'})
    request.state.tenant = caller.tenant_id
    if caller.retry_after_s:
        wait = int(caller.retry_after_s)
        raise ApiError(429, "rate_limited", f"over {r.settings.rate_limit_per_minute} requests per minute for this "
                                            f"key; retry in {wait} s", {"Retry-After": str(wait)})
    return caller.tenant_id


Tenant = Annotated[str, Depends(tenant)]
Rag = Annotated[Ragd, Depends(rag)]


def own_tenant(request: Request, key_tenant: str, body_tenant: str | None) -> str:
    if body_tenant is None:
        return key_tenant
    if request.app.state.keyed and body_tenant != key_tenant:
        raise ApiError(403, "forbidden", "tenant_id differs from the API key's tenant; omit it")
    return body_tenant
