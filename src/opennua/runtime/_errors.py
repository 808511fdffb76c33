"""The runtime's errors: one root, each failure a distinct type with a stable `code`."""

from __future__ import annotations


class RuntimeFailure(Exception):
    """Root of every error the runtime raises on purpose. `code` is what a turn's error shows."""

    code = "runtime_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ModelConfigError(RuntimeFailure):
    """A `provider:model` string that cannot be resolved (unknown provider, missing key)."""

    code = "model_config"


class IncompatibleCheckpoint(RuntimeFailure):
    """The stored checkpoint was written by another format or agent definition: never resume it."""

    code = "incompatible_checkpoint"


class OwnershipLost(RuntimeFailure):
    """A newer attempt owns the execution: this attempt must stop at once and write nothing."""

    code = "fenced"


class ToolError(RuntimeFailure):
    """A tool refused or failed; the message goes back to the model as the call's error."""

    code = "tool_error"


class BlobsUnavailable(RuntimeFailure):
    """The blob store refused or did not answer a write (an artifact port's `put`)."""

    code = "blobs_unavailable"
