"""QoS queues: minimum and maximum rates a port's traffic gets (OVS QoS/Queue on the node)."""

from __future__ import annotations

from typing import Any

from loom_api import errors
from loom_api.service.common import Owned, owned_api, owned_columns
from loom_api.service.crud import Caller, Resource, describe, first, optional
from loom_api.service.types import Rate
from loom_api.store import ReadView, WriteView


class QosQueueBody(Owned):
    """A QoS queue; rates in kbit/s."""

    min_rate: Rate | None = None
    max_rate: Rate | None = None
    dscp: int | None = None


class QosQueues(Resource):
    """`/api/v1/qos-queues`."""

    kind = "QoS queue"
    table = "QoS_Queue"
    model = QosQueueBody

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the queue's representation."""
        return {
            **owned_api(row),
            "min_rate": first(row.min_rate),
            "max_rate": first(row.max_rate),
            "dscp": first(row.dscp),
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the rates are ordered and the DSCP value fits, and return the columns."""
        if (
            body.min_rate is not None
            and body.max_rate is not None
            and body.min_rate > body.max_rate
        ):
            raise errors.ValidationFailed(
                field="min_rate",
                detail=f"min_rate {body.min_rate} is above max_rate {body.max_rate}",
            )
        if body.dscp is not None and not 0 <= body.dscp <= 63:
            raise errors.ValidationFailed(field="dscp", detail="dscp must be 0..63")
        cols = owned_columns(caller, body, row)
        for other in view.rows(self.table):
            if (
                (other.tenant, other.name) == (cols["tenant"], body.name)
                and body.name
                and (row is None or other.uuid != row.uuid)
            ):
                raise errors.Conflict(field="name", detail=f"QoS queue {body.name!r} exists")
        return {
            **cols,
            "min_rate": optional(body.min_rate),
            "max_rate": optional(body.max_rate),
            "dscp": optional(body.dscp),
        }

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Ports using the queue block its deletion."""
        ports = [p for p in view.rows("Logical_Switch_Port") if row in p.qos_queue]
        return describe("logical switch port", ports)
