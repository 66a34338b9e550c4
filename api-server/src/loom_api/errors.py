"""The API's errors: one base class, templated messages, mapped to JSON once in the app.

Every error the API returns is a `LoomApiError` subclass carrying an HTTP status, a stable
machine-readable `code`, a message filled from keyword arguments, and (when one field is at
fault) the request field's name. The Flask app has one error handler that renders
`{"error": code, "message": text, "field": name}`; the service layer raises these and
imports no Flask.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


class ErrorBody(BaseModel):
    """Every error the API returns."""

    model_config = ConfigDict(extra="forbid", title="Error")

    error: str = Field(description="A stable machine-readable code.")
    message: str = Field(description="What went wrong, for people.")
    field: str | None = Field(
        description="The request field at fault (dotted for nested fields), or null."
    )


class LoomApiError(Exception):
    """Base of all API errors; subclasses set `status`, `code` and a `message` template."""

    status: ClassVar[int] = 400
    code: ClassVar[str] = "bad_request"
    message: ClassVar[str] = "%(detail)s"
    retry_after: ClassVar[int | None] = None
    """Seconds a client should wait before retrying (`Retry-After`), for a passing condition."""

    def __init__(self, *, field: str | None = None, **kw: Any) -> None:
        self.field = field
        self.kw = kw
        try:
            text = self.message % kw
        except (KeyError, TypeError):
            text = self.message
        super().__init__(text)

    @property
    def text(self) -> str:
        """The rendered message."""
        return str(self)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON body of the error response (an `ErrorBody`)."""
        return {"error": self.code, "message": self.text, "field": self.field}

    def headers(self) -> dict[str, str]:
        """Return the headers of the error response (`Retry-After`)."""
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


class BadRequest(LoomApiError):
    """The request is malformed or a value is invalid (400)."""

    code = "bad_request"
    message = "%(detail)s"


class MalformedJson(LoomApiError):
    """The body is not a JSON object (400)."""

    code = "malformed_json"
    message = "request body is not valid JSON: %(detail)s"


class ValidationFailed(LoomApiError):
    """A field has the wrong type or an invalid value (400)."""

    code = "invalid_value"
    message = "%(detail)s"


class UnknownField(LoomApiError):
    """The body names a field the resource does not have (400)."""

    code = "unknown_field"
    message = "unknown field %(name)r"


class JsonTooDeep(LoomApiError):
    """The body nests arrays and objects deeper than the configured limit (400)."""

    code = "json_too_deep"
    message = "request body nests arrays and objects deeper than %(limit)d levels"


class UnknownParameter(LoomApiError):
    """The query string names a parameter the path does not take, or repeats one (400)."""

    code = "unknown_parameter"
    message = "%(detail)s"


class MissingReference(LoomApiError):
    """The body refers to an object that does not exist or is not visible (400)."""

    code = "missing_reference"
    message = "%(kind)s %(id)s does not exist"


class Unauthenticated(LoomApiError):
    """No token, or an unknown token (401)."""

    status = 401
    code = "unauthenticated"
    message = "a valid bearer token is required"


class Forbidden(LoomApiError):
    """The token may not do this (403)."""

    status = 403
    code = "forbidden"
    message = "%(detail)s"


class NotFound(LoomApiError):
    """No such object, or not visible to this tenant (404)."""

    status = 404
    code = "not_found"
    message = "%(kind)s %(id)s not found"


class MethodNotAllowed(LoomApiError):
    """The path exists but not with this method (405)."""

    status = 405
    code = "method_not_allowed"
    message = "%(detail)s"


class Conflict(LoomApiError):
    """The change contradicts the stored configuration (409): duplicates, references in use."""

    status = 409
    code = "conflict"
    message = "%(detail)s"


class InUse(Conflict):
    """Deleting an object that other objects still reference (409)."""

    code = "in_use"
    message = "%(kind)s %(id)s is still used by %(users)s"


class PreconditionFailed(LoomApiError):
    """`If-Match` named a stale ETag (412)."""

    status = 412
    code = "precondition_failed"
    message = "%(kind)s %(id)s has changed: ETag %(given)s is stale, current is %(current)s"


class PreconditionRequired(LoomApiError):
    """Reserved for deployments that require If-Match on updates (428)."""

    status = 428
    code = "precondition_required"
    message = "this update requires an If-Match header"


class BodyTooLarge(LoomApiError):
    """The body is longer than the configured limit (413); it was not read past the limit."""

    status = 413
    code = "body_too_large"
    message = "request body exceeds the limit of %(limit)d bytes"


class UnsupportedMediaType(LoomApiError):
    """The body is not `application/json` (415)."""

    status = 415
    code = "unsupported_media_type"
    message = "request body must be application/json"


class Unavailable(LoomApiError):
    """The configuration database cannot be reached (503); nothing was written."""

    status = 503
    code = "database_unavailable"
    message = "the configuration database is unreachable (%(detail)s); retry later"


class StorageFull(Unavailable):
    """The configuration database cannot write its file: its disk is full or failing (503);
    nothing was written. It is the server's condition, not the request's: retry later."""

    code = "storage_full"
    message = (
        "the configuration database cannot write to its disk (%(detail)s); nothing was "
        "written; retry later"
    )
    retry_after = 5


class ControllerUnavailable(LoomApiError):
    """A physical controller the request needs does not answer, or none masters the node
    (503)."""

    status = 503
    code = "controller_unavailable"
    message = "%(detail)s"


class OutcomeUnknown(Unavailable):
    """The connection dropped after a change was sent (503): it may or may not have committed."""

    code = "outcome_unknown"
    message = (
        "the configuration database connection was lost while committing (%(detail)s); "
        "the change may or may not have been applied; read it back before retrying"
    )
