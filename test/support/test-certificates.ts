import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { generate } from "selfsigned";

/** A throw-away certificate authority and a server certificate it signed for 127.0.0.1 / localhost. */
export interface TestCertificates {
  /** PEM file of the CA (what a client trusts: `tlsCAFile=`). */
  caFile: string;
  caCert: string;
  /** PEM of the server certificate and its private key. */
  cert: string;
  key: string;
  /** Removes the directory the CA file is in. */
  remove(): Promise<void>;
}

/**
 * Generates a CA and a server certificate at test time (nothing is checked in; CI needs no
 * openssl). EC keys: generating them takes milliseconds, RSA keys take a second.
 */
export async function generateTestCertificates(): Promise<TestCertificates> {
  const days = (n: number) => new Date(Date.now() + n * 86_400_000);
  const ca = await generate([{ name: "commonName", value: "agent-server test CA" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: days(-1),
    notAfterDate: days(2),
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const server = await generate([{ name: "commonName", value: "localhost" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: days(-1),
    notAfterDate: days(2),
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          { type: 7, ip: "127.0.0.1" },
        ],
      },
    ],
  });
  const dir = await mkdtemp(path.join(os.tmpdir(), "esdb-ca-"));
  const caFile = path.join(dir, "ca.crt");
  await writeFile(caFile, ca.cert);
  return { caFile, caCert: ca.cert, cert: server.cert, key: server.private, remove: () => rm(dir, { recursive: true, force: true }) };
}
