// Node-only helpers: a TCP connection (@nats-io/transport-node) and
// uploading a directory as a workspace.

import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { BatonClient } from "./client.js";
import { tarFiles, type PutWorkspaceOptions, type TarEntry } from "./workspace.js";

export { connect } from "@nats-io/transport-node";

/**
 * tarDir reads dir as tar entries in path order, names relative to dir:
 * files, directories and symbolic links (as links, never followed),
 * without sockets, devices and FIFOs (Go: client.TarDir).
 */
export async function tarDir(dir: string): Promise<TarEntry[]> {
  const out: TarEntry[] = [];
  const walk = async (rel: string) => {
    const names = (await readdir(join(dir, rel))).sort();
    for (const name of names) {
      const r = rel ? `${rel}/${name}` : name;
      const p = join(dir, r);
      const st = await lstat(p);
      if (st.isSymbolicLink()) {
        out.push({ path: r, type: "symlink", data: await readlink(p), mtime: st.mtime });
      } else if (st.isDirectory()) {
        out.push({ path: r, type: "dir", mode: st.mode & 0o7777, mtime: st.mtime });
        await walk(r);
      } else if (st.isFile()) {
        out.push({ path: r, data: await readFile(p), mode: st.mode & 0o7777, mtime: st.mtime });
      }
    }
  };
  await walk("");
  return out;
}

/**
 * putWorkspaceDir stores dir as a gzipped tar with client.putWorkspace and
 * returns its name (Go: client.PutWorkspaceDir).
 */
export async function putWorkspaceDir(client: BatonClient, dir: string, opts: PutWorkspaceOptions = {}): Promise<string> {
  const tar = tarFiles(await tarDir(dir));
  return client.putWorkspace(new Uint8Array(gzipSync(tar)), opts);
}
