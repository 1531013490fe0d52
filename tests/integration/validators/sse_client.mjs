// The event stream read by an EventSource client that is not Kiln's: the
// `eventsource` package (web/'s devDependencies, WHATWG EventSource for
// node), through a small proxy that cuts the first connection after a few
// events, so the client's own reconnect (same URL, Last-Event-ID header) is
// what resumes it.
//   node sse_client.mjs WEB_DIR BASE_URL TOKEN SINCE NODES
// Creates NODES fake nodes (kc-0..) and moves each to manageable while the
// stream is open, then prints one JSON object on stdout:
//   {"events": [{"id", "type", "data"}...],   every event the client dispatched
//    "connections": [{"last_event_id"}...],   what each connection sent
//    "cut_after": <id of the last event the client had when the proxy cut>}
// and exits 0, once every node's manageable transition has arrived, or 1
// after 20 s. Exit 77 when the package is not installed.
import { createRequire } from 'node:module';
import http from 'node:http';
import path from 'node:path';

const [webDir, base, token, since, nodeCount] = process.argv.slice(2);
const require = createRequire(path.join(webDir, 'package.json'));
let EventSource;
try {
  ({ EventSource } = await import(require.resolve('eventsource')));
} catch {
  console.log(`SKIP: eventsource is not installed (npm ci in ${webDir})`);
  process.exit(77);
}

const kCutAfter = 3;  // events on the first connection before the proxy drops it
const upstream = new URL(base);
const connections = [];
const proxy = http.createServer((req, res) => {
  const n = connections.length;
  connections.push({ last_event_id: req.headers['last-event-id'] ?? null });
  const up = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method,
                            headers: req.headers }, (ur) => {
    res.writeHead(ur.statusCode, ur.headers);
    // Forwarded one whole event at a time, so the cut falls between events
    // whatever TCP's chunks were: a cut inside an event would test what a
    // client makes of half an event, not resuming.
    let ids = 0;
    let pending = '';
    let cut = false;
    ur.on('data', (chunk) => {
      if (cut) return;
      pending += chunk.toString();
      for (let end = pending.indexOf('\n\n'); end >= 0 && !cut; end = pending.indexOf('\n\n')) {
        const event = pending.slice(0, end + 2);
        pending = pending.slice(end + 2);
        if (/^id: /m.test(event)) ids += 1;
        if (n === 0 && ids >= kCutAfter) {  // a dropped connection, as a flaky network would
          // Closed once the events are flushed to the client: destroying the
          // socket at once could discard them unread (seen under load), and
          // then there is nothing to resume from.
          cut = true;
          res.write(event, () => {
            ur.destroy();
            res.socket.end();
          });
        } else {
          res.write(event);
        }
      }
    });
    ur.on('end', () => { if (!cut) res.end(pending); });
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
});
await new Promise((r) => proxy.listen(0, '127.0.0.1', r));

const events = [];
let cutAfter = null;
// Every event the client parses goes through dispatchEvent, whatever its
// name: no list of event types is assumed.
class EveryEvent extends EventSource {
  dispatchEvent(e) {
    if (e.type === 'error' && cutAfter === null && events.length) cutAfter = events[events.length - 1].id;
    if (e.type !== 'open' && e.type !== 'error') events.push({ id: e.lastEventId, type: e.type, data: e.data });
    return super.dispatchEvent(e);
  }
}
const auth = { Authorization: `Bearer ${token}` };
const es = new EveryEvent(`http://127.0.0.1:${proxy.address().port}/v1/events/stream?since=${since}`, {
  fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, ...auth } }),
});

async function api(method, target, body) {
  const r = await fetch(base + target, { method, headers: { ...auth, 'Content-Type': 'application/json' },
                                         body: body && JSON.stringify(body) });
  if (r.status >= 300) throw new Error(`${method} ${target}: ${r.status} ${await r.text()}`);
}
const names = [...Array(Number(nodeCount)).keys()].map((i) => `kc-${i}`);
for (const name of names)
  await api('POST', '/v1/nodes', { name, bmc: { driver: 'fake', address: `bmc-${name}` } });
for (const name of names) await api('PUT', `/v1/nodes/${name}/states/provision`, { target: 'manage' });

const managed = () =>
  events.filter((e) => e.type === 'provision.transition' && JSON.parse(e.data).to === 'manageable').length >=
  names.length;
const deadline = Date.now() + 20000;
while (!managed() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 300));  // anything after the last transition arrives too
es.close();
proxy.close();
console.log(JSON.stringify({ events, connections, cut_after: cutAfter }));
process.exit(managed() ? 0 : 1);
