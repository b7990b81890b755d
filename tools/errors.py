"""Exceptions a tool raises to tell the gateway how to treat its failure."""

from reactgraph.errors import ReactGraphError


class ToolError(ReactGraphError):
    """A tool failed in a way the model should read verbatim (e.g. "no weather data for Atlantis")."""


class TransientToolError(ToolError):
    """A failure that may succeed on retry (network blip, 503); only these are retried."""


class ToolRegistrationError(ReactGraphError, ValueError):
    """A tool definition cannot be registered (duplicate name, bad schema)."""


class ToolInputError(ToolError):
    """The arguments are well-typed but unusable (bad expression, unknown timezone): the model must fix them.

    The gateway reports these as `invalid_args`, which never counts against the tool's circuit breaker.
    """
