// The ssh command the portal shows and copies for a node, rebuilt from parsed
// parts. The node's `ssh` value ("user@address") comes from kilnd, which got
// the address from the machine itself, so it is untrusted: copied as is, a
// newline in it would run a second command when pasted into a terminal, and
// a space or an option would change what ssh does. So the line is only ever
// "ssh <login>@<IP literal>", each part checked against its own grammar; any
// other value gives null and the page shows a neutral message instead, never
// the raw text.

// A POSIX login name, as kilnd's image `ssh_user` rule has it.
const kLogin = /^[a-z_][a-z0-9_-]{0,31}$/;

function isIpv4(s: string): boolean {
  const parts = s.split(".");
  return parts.length === 4 && parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255);
}

// An IPv6 address in text form (RFC 4291 §2.2), with an optional dotted IPv4
// tail; no zone id ("%eth0" is free text), no brackets, no port.
function isIpv6(s: string): boolean {
  if (s.length > 45 || !/^[0-9A-Fa-f:.]+$/.test(s)) return false;
  const halves = s.split("::");
  if (halves.length > 2) return false;
  const groups = (h: string): string[] => (h === "" ? [] : h.split(":"));
  const all = [...groups(halves[0] ?? ""), ...(halves.length === 2 ? groups(halves[1] ?? "") : [])];
  let count = 0;
  for (let i = 0; i < all.length; i++) {
    const g = all[i] ?? "";
    // A dotted IPv4 tail only at the very end ("::ffff:192.0.2.1").
    if (i === all.length - 1 && g.includes(".") && s.endsWith(g)) {
      if (!isIpv4(g)) return false;
      count += 2;
    } else if (/^[0-9A-Fa-f]{1,4}$/.test(g)) {
      count += 1;
    } else {
      return false;
    }
  }
  return halves.length === 2 ? count < 8 : count === 8;
}

export function isIpLiteral(s: string): boolean {
  return isIpv4(s) || isIpv6(s);
}

// "ssh <user>@<address>" when `ssh` is exactly "<login>@<IP literal>";
// otherwise null (not reported, or not something safe to show and copy).
export function sshCommand(ssh: string | null | undefined): string | null {
  if (typeof ssh !== "string") return null;
  const at = ssh.indexOf("@");
  if (at < 0) return null;
  const user = ssh.slice(0, at);
  const address = ssh.slice(at + 1);
  if (!kLogin.test(user) || !isIpLiteral(address)) return null;
  return `ssh ${user}@${address}`;
}

// The OS's SSH host key types kilnd accepts (common/ssh_host_key.h).
const kHostKeyTypes = new Set([
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "ssh-rsa",
  "sk-ssh-ed25519@openssh.com",
  "sk-ecdsa-sha2-nistp256@openssh.com",
]);
// "SHA256:" and the unpadded base64 of 32 bytes, as ssh-keygen -l prints it.
const kFingerprint = /^SHA256:[A-Za-z0-9+/]{43}$/;

// The host key fingerprints to show beside the ssh line, "<type> SHA256:...",
// each rebuilt from a known type and a fingerprint of its exact form (the
// keys came from the node's own OS); anything else is left out.
export function hostKeyFingerprints(keys: unknown): string[] {
  if (!Array.isArray(keys)) return [];
  const out: string[] = [];
  for (const k of keys) {
    if (typeof k !== "object" || k === null) continue;
    const { type, sha256 } = k as { type?: unknown; sha256?: unknown };
    if (typeof type !== "string" || typeof sha256 !== "string") continue;
    if (!kHostKeyTypes.has(type) || !kFingerprint.test(sha256)) continue;
    out.push(`${type} ${sha256}`);
  }
  return out;
}
