"""A real MCP client (the official Python SDK, PyPI `mcp`) driving `a2rag mcp` over stdio.

Run by tests/mcp.rs:  python tests/mcp_client.py A2RAG_BINARY DATA_DIR
The data directory holds tests/fixtures/rpc, ingested with its triples. Any failed check
raises; the last line printed on success is `ALL OK`.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation

try:  # SDK 2.x
    from mcp.shared.exceptions import MCPError as ProtocolError
except ImportError:  # SDK 1.x
    from mcp.shared.exceptions import McpError as ProtocolError

CLIENT = Implementation(name="a2rag-test", version="1.0")

TOOLS = {"retrieve", "ask", "ingest_text", "kb_stats", "list_proposals", "review_proposal"}


def structured(result):
    """The tool's JSON result; the text content carries the same JSON."""
    assert not field(result, "is_error"), f"tool error: {text(result)}"
    data = field(result, "structured_content")
    assert data is not None, "no structured content"
    assert json.loads(text(result)) == data, "text and structured content differ"
    return data


def field(obj, snake):
    """A model field by its 2.x name, or by the 1.x camelCase name."""
    if hasattr(obj, snake):
        return getattr(obj, snake)
    head, *rest = snake.split("_")
    return getattr(obj, head + "".join(w.capitalize() for w in rest))


def text(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def tool_error(session, name, arguments):
    """The message of a call that must fail, whether as a tool error or a protocol error."""
    try:
        result = await session.call_tool(name, arguments)
    except ProtocolError as e:
        return f"protocol error: {e}"
    assert field(result, "is_error"), f"{name}({arguments}) should have failed: {text(result)}"
    return text(result)


async def main(binary, data_dir):
    server = StdioServerParameters(command=binary, args=["--data-dir", data_dir, "mcp"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, client_info=CLIENT) as session:
            init = await session.initialize()
            assert field(init, "server_info").name == "a2rag", field(init, "server_info")
            assert init.capabilities.tools is not None
            print("protocol", field(init, "protocol_version"))

            # Tools, each with a description and an object schema.
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS, sorted(tools)
            for t in tools.values():
                assert t.description and len(t.description) > 80, t.name
                schema = field(t, "input_schema")
                assert schema["type"] == "object", t.name
                assert "kb" in schema["properties"], t.name
            assert field(tools["retrieve"], "input_schema")["required"] == ["question"]
            assert set(field(tools["review_proposal"], "input_schema")["required"]) == {"id", "decision"}
            print("tools", sorted(tools))

            # Evidence with provenance, no answer.
            found = structured(await session.call_tool("retrieve", {"question": "Where was Marie Curie born?"}))
            assert found["gate"]["in_scope"] is True, found["gate"]
            chunks = found["retrieval"]["chunks"]
            assert chunks, found
            top = chunks[0]
            assert top["doc_id"].endswith("curie.txt"), top
            assert {"doc_id", "title", "span", "score", "text", "chunk"} <= set(top), top
            assert "Warsaw" in top["text"] and len(top["span"]) == 2
            assert found["retrieval"]["stages"], "per-stage report"
            assert "answer" not in found
            print("retrieve", top["doc_id"], top["span"], found["retrieval"]["stage"])

            # The whole controller, with a budget.
            answered = structured(
                await session.call_tool("ask", {"question": "Where was Marie Curie born?", "budget": {"max_iterations": 2}})
            )
            assert answered["answer"] == "Warsaw", answered.get("abstained")
            assert answered["proposals"], "an accepted answer proposes triples"
            print("ask", answered["answer"], "proposals", answered["proposals"])

            # Ingest a document inline, then find it.
            ingested = structured(
                await session.call_tool(
                    "ingest_text",
                    {"documents": [{"id": "oder", "title": "Oder", "text": "The Oder flows through Wroclaw. The Oder forms part of the border of Germany."}]},
                )
            )
            assert ingested["report"]["added"] == 1, ingested
            assert ingested["stats"]["documents"] == 4, ingested
            found = structured(await session.call_tool("retrieve", {"question": "Which river flows through Wroclaw?", "top_k": 2}))
            docs = [c["doc_id"] for c in found["retrieval"]["chunks"]]
            assert len(docs) <= 2 and "oder" in docs, found["retrieval"]["chunks"]
            print("ingest_text then retrieve", docs)

            # Curation: the answer's proposals are pending; approve one, reject another.
            pending = structured(await session.call_tool("list_proposals", {"status": "pending"}))["proposals"]
            assert set(answered["proposals"]) <= {p["id"] for p in pending}, pending
            first, second = answered["proposals"][0], answered["proposals"][1]
            approved = structured(await session.call_tool("review_proposal", {"id": first, "decision": "approve"}))
            assert approved["status"] == "approved" and approved["edge"] is not None, approved
            assert approved["decided_by"] == "mcp:a2rag-test", approved["decided_by"]
            rejected = structured(await session.call_tool("review_proposal", {"id": second, "decision": "reject", "who": "ann"}))
            assert (rejected["status"], rejected["decided_by"]) == ("rejected", "ann"), rejected
            now = structured(await session.call_tool("list_proposals", {"status": "approved"}))["proposals"]
            assert [p["id"] for p in now] == [first], now
            print("review_proposal approved", first, "rejected", second)

            # Bad calls are errors with a message, and the server keeps serving.
            message = await tool_error(session, "no_such_tool", {})
            assert "no_such_tool" in message, message
            message = await tool_error(session, "retrieve", {})
            assert "question" in message, message
            message = await tool_error(session, "retrieve", {"question": "Where?", "colour": "red"})
            assert "colour" in message, message
            message = await tool_error(session, "review_proposal", {"id": first, "decision": "approve"})
            assert "already approved" in message, message
            message = await tool_error(session, "review_proposal", {"id": second + 1000, "decision": "edit"})
            assert "subject, relation and object" in message, message
            message = await tool_error(session, "kb_stats", {"kb": "nope"})
            assert "unknown knowledge base `nope`" in message, message
            message = await tool_error(session, "ask", {"question": "   "})
            assert "question is empty" in message, message
            stats = structured(await session.call_tool("kb_stats", {}))
            assert stats["stats"]["documents"] == 4 and stats["kbs"] == ["default"], stats
            print("bad calls answered; kb_stats after them", stats["stats"]["documents"])
    await modern(server)
    print("ALL OK")


async def modern(server):
    """The SDK's newest revision (2026-07-28: discovery and per-request metadata, no
    `initialize`), where the client library has it (SDK 2.x)."""
    try:
        from mcp import Client
    except ImportError:
        print("modern: skipped (this SDK has no stateless revision)")
        return
    async with Client(server, mode="auto") as client:
        version = client.protocol_version
        assert version == "2026-07-28", version
        found = structured(await client.call_tool("retrieve", {"question": "Which river flows through Wroclaw?"}))
        assert "oder" in [c["doc_id"] for c in found["retrieval"]["chunks"][:2]], found
        failed = await client.call_tool("retrieve", {})
        assert field(failed, "is_error") and "question" in text(failed), text(failed)
        print("modern", version, "retrieve", [c["doc_id"] for c in found["retrieval"]["chunks"][:2]])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
