// The example's server: it serves the page and passes /api/agui to baton
// console, adding the console's token (the browser never holds it) and the
// profile the session runs (forwardedProps), and streams the answer back
// as it comes. Node's standard library only.
import { createServer } from 'node:http'
import { readFile } from 'node:fs/promises'
import { extname, join } from 'node:path'

const consoleURL = process.env.BATON_CONSOLE_URL || 'http://127.0.0.1:8233'
const token = process.env.BATON_CONSOLE_TOKEN
const profile = process.env.BATON_PROFILE || 'chat'
const input = process.env.BATON_INPUT || 'stream-json'
const port = Number(process.env.PORT || 5173)
if (!token) {
  console.error('set BATON_CONSOLE_TOKEN to the console token (see docs/console.md)')
  process.exit(2)
}

const types = { '.html': 'text/html', '.js': 'text/javascript' }
const publicDir = join(import.meta.dirname, 'public')

async function agui(req, res) {
  let body = ''
  for await (const chunk of req) body += chunk
  const run = JSON.parse(body)
  run.forwardedProps = { ...run.forwardedProps, profile, input }
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }
  if (req.headers['last-event-id']) headers['Last-Event-ID'] = req.headers['last-event-id']
  const ctrl = new AbortController()
  res.on('close', () => ctrl.abort()) // the browser left: stop reading
  const upstream = await fetch(`${consoleURL}/api/agui`, { method: 'POST', headers, body: JSON.stringify(run), signal: ctrl.signal })
  res.writeHead(upstream.status, { 'Content-Type': upstream.headers.get('content-type') || 'text/plain', 'Cache-Control': 'no-store' })
  for await (const chunk of upstream.body) res.write(chunk)
  res.end()
}

createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/api/agui') return await agui(req, res)
    if (req.method !== 'GET') return res.writeHead(405).end()
    const path = req.url === '/' ? '/index.html' : req.url
    if (!types[extname(path)] || path.includes('..')) return res.writeHead(404).end()
    res.writeHead(200, { 'Content-Type': types[extname(path)] }).end(await readFile(join(publicDir, path)))
  } catch (e) {
    if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain' })
    res.end(String(e))
  }
}).listen(port, '127.0.0.1', () => console.log(`baton react chat on http://127.0.0.1:${port}`))
