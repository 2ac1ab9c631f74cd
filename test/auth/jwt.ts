/** Test-only HS256 tokens shared by the JWT auth file and the tests that sign them. */
import { SignJWT } from "jose";

export const TEST_JWT_SECRET = new TextEncoder().encode("agent-server-tests-only-secret-0123456789");
export const TEST_JWT_ISSUER = "agent-server-tests";

/** A token for `sub` with space-separated `scope`s; `expiresIn` as jose reads it ("1h", "-1s"). */
export function signToken(sub: string, scopes: string[], options: { expiresIn?: string; secret?: Uint8Array; name?: string } = {}): Promise<string> {
  return new SignJWT({ scope: scopes.join(" "), name: options.name ?? sub })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(sub)
    .setIssuer(TEST_JWT_ISSUER)
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? "1h")
    .sign(options.secret ?? TEST_JWT_SECRET);
}
