// A CopilotKit page whose agent is a Sursis hosted agent over AG-UI; `useInterrupt` shows each
// pending call with an Approve button that resumes the run.
import React, { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { HttpAgent } from "@ag-ui/client";
import { CopilotKitProvider, useAgent, useCopilotKit, useInterrupt } from "@copilotkit/react-core/v2";

const params = new URLSearchParams(location.hash.slice(1));
const sursis = new HttpAgent({
  url: `/v1/agents/${params.get("agent") || "ops"}/ag-ui`,
  headers: { Authorization: `Bearer ${params.get("key")}` },
});

function Approvals() {
  const { copilotkit } = useCopilotKit();
  const { agent } = useAgent({ agentId: "sursis" });
  const [status, setStatus] = useState("starting");
  const approval = useInterrupt({
    agentId: "sursis",
    renderInChat: false,
    render: ({ interrupt, resolve }) => (
      <div id="interrupt" style={{ border: "1px solid #888", padding: 12, margin: 12 }}>
        <p>Sursis asks: {interrupt?.message}</p>
        <p>tool: <code>{interrupt?.metadata?.tool_name}</code> (expires {interrupt?.expiresAt})</p>
        <button id="approve" onClick={() => { setStatus("resuming"); resolve({ approved: true }); }}>Approve</button>
      </div>
    ),
  });
  useEffect(() => {
    agent.addMessage({ id: "user-1", role: "user", content: params.get("message") || "hello" });
    copilotkit.runAgent({ agent }).then(() => setStatus("waiting"), (e) => setStatus("error: " + e));
  }, []);
  const last = agent.messages.filter((m) => m.role === "assistant" && m.content).map((m) => m.content);
  return (
    <main style={{ fontFamily: "sans-serif", padding: 16 }}>
      <h1>CopilotKit + Sursis</h1>
      <p id="status">{status}</p>
      {approval}
      <p id="answer">{last.join(" ")}</p>
    </main>
  );
}

createRoot(document.getElementById("root")).render(
  <CopilotKitProvider selfManagedAgents={{ sursis }} agentId="sursis">
    <Approvals />
  </CopilotKitProvider>,
);
