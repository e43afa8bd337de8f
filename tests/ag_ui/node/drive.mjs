// Drives a Sursis hosted agent with the real AG-UI client: a run that ends in an interrupt, then a
// run that resumes it with an approval. Prints one JSON line per run with what it saw.
// Usage: SURSIS_URL=http://127.0.0.1:8000 SURSIS_KEY=... node drive.mjs "<user message>"
import { HttpAgent } from "@ag-ui/client";

const base = process.env.SURSIS_URL;
const key = process.env.SURSIS_KEY;
const agentName = process.env.SURSIS_AGENT ?? "ops";
const text = process.argv[2] ?? "hello";

const agent = new HttpAgent({
  url: `${base}/v1/agents/${agentName}/ag-ui`,
  headers: { Authorization: `Bearer ${key}` },
  threadId: `node-${Date.now()}-${Math.random().toString(16).slice(2)}`,
});
agent.addMessage({ id: "user-1", role: "user", content: text });

async function run(parameters) {
  const seen = { types: [], outcome: null, interrupts: [], result: null, error: null };
  try {
    await agent.runAgent(parameters, {
      onEvent({ event }) {
        seen.types.push(event.type);
      },
      onRunFinishedEvent(params) {
        seen.outcome = params.outcome;
        if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
        else seen.result = params.result ?? null;
      },
      onRunErrorEvent({ event }) {
        seen.error = { code: event.code ?? null, message: event.message };
      },
    });
  } catch (error) {
    seen.error = seen.error ?? { code: null, message: String(error) };
  }
  console.log(JSON.stringify(seen));
  return seen;
}

const first = await run({});
if (first.outcome !== "interrupt") process.exit(1);
const resume = first.interrupts.map((interrupt) => ({
  interruptId: interrupt.id,
  status: "resolved",
  payload: { approved: true },
}));
const second = await run({ resume });
console.log(JSON.stringify({ messages: agent.messages.map((m) => ({ role: m.role, content: m.content ?? null })) }));
process.exit(second.outcome === "success" ? 0 : 1);
