// GET /: the playground page and its two files (server/playground/). A strict content security
// policy lets the page load only its own files and call only this server.

import { Hono } from "hono";
import { PLAYGROUND_ASSETS } from "../playground/assets.ts";

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

export function playgroundRoutes(): Hono {
  const app = new Hono();
  for (const [path, asset] of Object.entries(PLAYGROUND_ASSETS)) {
    app.get(path, (c) =>
      c.body(asset.body, 200, {
        "content-type": asset.contentType,
        "cache-control": "no-cache",
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-content-type-options": "nosniff",
      }));
  }
  return app;
}
