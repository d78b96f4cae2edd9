// Runs the official AG-UI clients against a baton console (console's
// TestAGUIClients starts it): @tanstack/ai-client's ChatClient over
// fetchServerSentEvents, and @ag-ui/client's HttpAgent, each holding a
// conversation on a session of an interactive profile and one with tool
// calls, one of each with its first response cut short by the test's
// server. It prints what each client ended with as JSON; the Go test
// judges it. Every event of every run the conversations made is parsed
// with @ag-ui/core's EventSchema.
import { ChatClient, fetchServerSentEvents } from '@tanstack/ai-client'
import { HttpAgent } from '@ag-ui/client'
import { EventSchema } from '@ag-ui/core/schemas'

const base = process.env.BATON_URL
const headers = { Authorization: `Bearer ${process.env.BATON_TOKEN}` }
const endpoint = `${base}/api/agui`

async function tanstack(threadId, profile, input, texts) {
  let error
  const chat = new ChatClient({
    threadId,
    connection: fetchServerSentEvents(endpoint, { headers, body: { profile, input }, reconnect: { maxAttempts: 5, delayMs: 100 } }),
    onError: (e) => { error = String(e) },
  })
  for (const t of texts) {
    await chat.sendMessage(t)
    if (error) throw new Error(`tanstack ${threadId}: ${error}`)
  }
  return chat.getMessages().map((m) => ({ role: m.role, parts: m.parts }))
}

async function agui(threadId, profile, input, texts) {
  const agent = new HttpAgent({ url: endpoint, headers, threadId })
  let retries = 0
  for (const [i, content] of texts.entries()) {
    agent.addMessage({ id: `${threadId}-u${i}`, role: 'user', content })
    const params = { runId: `${threadId}-r${i}`, forwardedProps: { profile, input } }
    const before = structuredClone(agent.messages)
    try {
      await agent.runAgent(params)
    } catch (e) {
      // HttpAgent does not resume: run the same runId again, which the
      // console answers with the same turn and sends nothing twice.
      retries++
      agent.setMessages(before)
      await agent.runAgent(params)
    }
  }
  return { retries, messages: agent.messages }
}

// approvals holds a conversation with an agent whose profile has a
// policy, on @ag-ui/client's HttpAgent: an ask ends the turn with the
// interrupt outcome (agent.pendingInterrupts), and the next run's resume
// answers it (allowed, then one cancelled); a command the policy allows
// is no interrupt; answering an interrupt again is a RUN_ERROR 409.
async function approvals(threadId, profile) {
  const agent = new HttpAgent({ url: endpoint, headers, threadId })
  const steps = []
  let n = 0
  const say = async (content) => {
    agent.addMessage({ id: `${threadId}-u${n}`, role: 'user', content })
    await agent.runAgent({ runId: `${threadId}-r${n++}`, forwardedProps: { profile, input: 'stream-json' } })
    steps.push({ said: content, interrupts: structuredClone(agent.pendingInterrupts) })
  }
  const resume = async (entry) => {
    await agent.runAgent({ runId: `${threadId}-r${n++}`, resume: [entry], forwardedProps: { by: 'alice' } })
    steps.push({ resumed: entry, interrupts: structuredClone(agent.pendingInterrupts) })
  }
  await say('approve: git status')
  await say('approve: git push origin main')
  const first = agent.pendingInterrupts[0]
  await resume({ interruptId: first?.id, status: 'resolved', payload: { approved: true } })
  await say('approve: git push --force origin main')
  await resume({ interruptId: agent.pendingInterrupts[0]?.id, status: 'cancelled' })
  // The first interrupt again, by someone else: refused.
  const res = await fetch(endpoint, {
    method: 'POST', headers: { ...headers, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify({ threadId, runId: `${threadId}-again`, messages: [], tools: [], context: [],
      resume: [{ interruptId: first?.id, status: 'resolved', payload: { approved: false } }], forwardedProps: { by: 'bob' } }),
  })
  const again = (await res.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
  for (const e of again) {
    const r = EventSchema.safeParse(e)
    if (!r.success) throw new Error(`the refusal ${JSON.stringify(e)}: ${r.error}`)
  }
  return { steps, messages: agent.messages, again }
}

// hold: an ask nobody answers within the profile's askTimeout is held
// (the agent is told it awaits approval); resumed later with an allow,
// the agent gets a follow-up turn, retries, and runs it, in the run the
// resume's response carries.
async function hold(threadId, profile, waitMs) {
  const agent = new HttpAgent({ url: endpoint, headers, threadId })
  const steps = []
  agent.addMessage({ id: `${threadId}-u0`, role: 'user', content: 'approve: git push origin dev' })
  await agent.runAgent({ runId: `${threadId}-r0`, forwardedProps: { profile, input: 'stream-json' } })
  steps.push({ interrupts: structuredClone(agent.pendingInterrupts) })
  await new Promise((r) => setTimeout(r, Number(waitMs)))
  const resume = [{ interruptId: agent.pendingInterrupts[0]?.id, status: 'resolved', payload: { approved: true } }]
  const events = []
  await agent.runAgent({ runId: `${threadId}-r1`, resume, forwardedProps: { by: 'alice' } }, { onEvent: ({ event }) => { events.push(event.type === 'CUSTOM' ? `CUSTOM ${event.name}` : event.type) } })
  steps.push({ interrupts: structuredClone(agent.pendingInterrupts), events })
  return { steps, messages: agent.messages }
}

// Every event of each run of the threads, read from the run's stream.
async function checkSchemas(runs) {
  let n = 0
  for (const run of runs) {
    const res = await fetch(`${base}/api/runs/${run}/agui`, { headers })
    if (!res.ok) throw new Error(`GET ${run}/agui: ${res.status}`)
    for (const line of (await res.text()).split('\n')) {
      if (!line.startsWith('data: ')) continue
      const r = EventSchema.safeParse(JSON.parse(line.slice(6)))
      if (!r.success) throw new Error(`run ${run}: ${line}: ${r.error}`)
      n++
    }
  }
  return n
}

const out = {}
// A cut response also rejects a promise inside HttpAgent that nobody
// awaits: counted, not fatal; runAgent's own rejection is what the retry
// above handles.
out.unhandled = []
process.on('unhandledRejection', (e) => { out.unhandled.push(String(e)) })
const [mode, ...rest] = process.argv.slice(2)
if (mode === 'schemas') {
  out.events = await checkSchemas(rest)
} else if (mode === 'approvals') {
  out.approvals = await approvals(rest[0], rest[1])
} else if (mode === 'hold') {
  out.hold = await hold(rest[0], rest[1], rest[2])
} else {
  out.tanstackChat = await tanstack('tan-chat', 'chat', 'stream-json', ['hello', 'again'])
  out.tanstackTools = await tanstack('tan-tools', 'story', 'text', ['tell it', 'once more'])
  out.aguiChat = await agui('agui-chat', 'chat', 'stream-json', ['hello', 'again'])
  out.aguiTools = await agui('agui-tools', 'story', 'text', ['tell it'])
}
console.log(JSON.stringify(out))
