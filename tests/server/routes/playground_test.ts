// GET /: the playground page and every file it links to are served from the embedded assets, with
// their media types and a content security policy that keeps the page to this server, and without
// the API key (the page asks for the key itself).

import { PLAYGROUND_ASSETS } from "../../../server/playground/assets.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { startServer } from "../harness.ts";

Deno.test("playground: the page and the files it links are served with their types", async () => {
  const s = await startServer({ config: { apiKey: "sesame" } });
  try {
    const page = await fetch(`${s.url}/`);
    assertEquals(page.status, 200);
    assertEquals(page.headers.get("content-type"), "text/html; charset=utf-8");
    assertMatch(page.headers.get("content-security-policy")!, /default-src 'none'/);
    assertMatch(page.headers.get("content-security-policy")!, /connect-src 'self'/);
    const html = await page.text();
    assertMatch(html, /<title>Sluice playground<\/title>/);

    // Every local file the page links is served; nothing comes from another origin.
    const links = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    const local = links.filter((l) => l.startsWith("/"));
    assertEquals(links.filter((l) => !l.startsWith("/") && !l.startsWith("data:")), []);
    assertEquals(local.sort(), ["/playground/playground.css", "/playground/playground.js"]);
    const types = { css: "text/css; charset=utf-8", js: "text/javascript; charset=utf-8" };
    for (const path of local) {
      const res = await fetch(s.url + path);
      assertEquals(res.status, 200, path);
      assertEquals(res.headers.get("content-type"), types[path.endsWith(".css") ? "css" : "js"]);
      assertEquals(res.headers.get("x-content-type-options"), "nosniff");
      assertEquals(await res.text(), PLAYGROUND_ASSETS[path].body);
    }
    // The page's script calls only this server's routes.
    const js = PLAYGROUND_ASSETS["/playground/playground.js"].body;
    assert(!/https?:\/\//.test(js), "no absolute URLs in the script");
  } finally {
    await s.close();
  }
});
