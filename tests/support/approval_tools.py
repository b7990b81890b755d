"""Tools for the approval tests: some ask a person before each call, some do not."""

from __future__ import annotations

from reactgraph.tools import ToolGateway


def risky_gateway(ran: list[str]) -> ToolGateway:
    """`delete_file` and `send_mail` ask for approval, `pay` too but may only be approved or rejected, `lookup`
    does not ask, `archive` is tagged "files"."""
    gateway = ToolGateway()

    @gateway.tool(approval="always", tags=("files",))
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file to delete.
        """
        ran.append(f"delete:{path}")
        return f"deleted {path}"

    @gateway.tool(approval="always")
    def send_mail(to: str) -> str:
        """Send a mail.

        Args:
            to: The address.
        """
        ran.append(f"mail:{to}")
        return f"sent to {to}"

    @gateway.tool(tags=("files",))
    def archive(path: str) -> str:
        """Archive a file.

        Args:
            path: The file to archive.
        """
        ran.append(f"archive:{path}")
        return f"archived {path}"

    @gateway.tool(approval="always", approval_decisions=("approve", "reject"))
    def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: How much.
        """
        ran.append(f"pay:{amount}")
        return f"paid {amount}"

    @gateway.tool
    def lookup(topic: str) -> str:
        """Look a topic up.

        Args:
            topic: What to look up.
        """
        ran.append(f"lookup:{topic}")
        return f"notes on {topic}"

    return gateway
