// The shape of an OpenSSH public key line, checked in the form before submit
// so a pasted private key or a truncated line is refused next to the field.
// kilnd checks keys again (400 naming /ssh_keys/0); this is only the shape:
// "<type> <base64 blob> [comment]", the blob decoding to a string that names
// the same type (the wire format starts with the key type).

const kTypes = [
  "ssh-ed25519",
  "ssh-rsa",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "sk-ssh-ed25519@openssh.com",
  "sk-ecdsa-sha2-nistp256@openssh.com",
];

// null when `line` looks like a public key; otherwise why not, in words.
export function sshKeyProblem(line: string): string | null {
  const text = line.trim();
  if (text === "") return "Paste your SSH public key (for example ~/.ssh/id_ed25519.pub).";
  if (text.includes("PRIVATE KEY")) return "This is a private key. Paste the public key (the .pub file) instead.";
  if (/[\r\n]/.test(text)) return "Paste one key on one line.";
  const parts = text.split(/\s+/);
  const type = parts[0] ?? "";
  if (!kTypes.includes(type))
    return `Unknown key type "${type.slice(0, 40)}": expected ssh-ed25519, ssh-rsa or ecdsa-sha2-nistp256.`;
  const blob = parts[1] ?? "";
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(blob) || blob.length % 4 !== 0)
    return "The key data after the type is not base64: is the line complete?";
  let raw: string;
  try {
    raw = atob(blob);
  } catch {
    return "The key data after the type is not base64: is the line complete?";
  }
  if (raw.length < 4) return "The key data is too short.";
  const n = ((raw.charCodeAt(0) << 24) | (raw.charCodeAt(1) << 16) | (raw.charCodeAt(2) << 8) | raw.charCodeAt(3)) >>> 0;
  if (raw.slice(4, 4 + n) !== type) return `The key data does not hold a ${type} key.`;
  return null;
}
