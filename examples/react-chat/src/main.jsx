// A chat on a baton session: TanStack AI's useChat posts each message as an
// AG-UI RunAgentInput to /api/agui (server.mjs passes it to baton console
// with the console's token), and renders the agent's text and tool calls as
// they stream. A cut stream resumes by itself (Last-Event-ID).
import { useState } from 'react'
import { createRoot } from 'react-dom/client'
import { useChat } from '@tanstack/ai-react'
import { fetchServerSentEvents } from '@tanstack/ai-client'

// One thread per browser tab: the baton session the conversation lives in.
const threadId = sessionStorage.threadId || (sessionStorage.threadId = 'chat-' + crypto.randomUUID().slice(0, 8))

function Part({ part }) {
  if (part.type === 'text') return <span>{part.content}</span>
  if (part.type === 'tool-call') return <div className="tool">⚙ {part.name} {part.arguments}</div>
  if (part.type === 'tool-result') return <div className="tool">↳ {String(part.content).slice(0, 400)}</div>
  return null
}

function App() {
  const [text, setText] = useState('')
  const { messages, sendMessage, isLoading, error } = useChat({
    threadId,
    connection: fetchServerSentEvents('/api/agui'),
  })
  const send = (e) => {
    e.preventDefault()
    if (!text.trim()) return
    sendMessage(text)
    setText('')
  }
  return (
    <>
      <p>Session <code id="thread">{threadId}</code></p>
      <div id="messages">
        {messages.map((m) => (
          <div key={m.id} className={'msg ' + m.role} data-role={m.role}>
            {m.parts.map((p, i) => <Part key={i} part={p} />)}
          </div>
        ))}
      </div>
      {error && <p className="error">{String(error.message || error)}</p>}
      <form onSubmit={send}>
        <textarea id="message" value={text} onChange={(e) => setText(e.target.value)} placeholder="Message the agent" />
        <button id="send" disabled={isLoading}>Send</button>
      </form>
    </>
  )
}

createRoot(document.getElementById('root')).render(<App />)
