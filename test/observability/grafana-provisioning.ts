/**
 * The provisioned Grafana data sources (grafana/provisioning/datasources/*.yml), parsed strictly,
 * for the tests that run the dashboard as Grafana would.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { DATASOURCE_UID } from "./dashboard.js";
import { isRecord, list, loadYaml, record, ROOT, type YamlRecord } from "./config-files.js";

export const DATASOURCES_DIR = join("grafana", "provisioning", "datasources");

export interface ProvisionedDataSource {
  file: string;
  name: string;
  uid: string;
  type: string;
  url: string;
  jsonData: YamlRecord;
}

/** Every data source of every provisioning file, with the file it is in. */
export function provisionedDataSources(): ProvisionedDataSource[] {
  return readdirSync(join(ROOT, DATASOURCES_DIR))
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .flatMap((f) => {
      const file = join(DATASOURCES_DIR, f);
      const { root } = loadYaml(file);
      if (root.apiVersion !== 1) throw new Error(`${file}: apiVersion is not 1`);
      return list(root.datasources, `${file}: datasources`).map((d) => {
        const ds = record(d, `${file}: a data source`);
        const text = (key: string) => {
          const value = ds[key];
          if (typeof value !== "string") throw new Error(`${file}: a data source without ${key}`);
          return value;
        };
        return {
          file,
          name: text("name"),
          uid: text("uid"),
          type: text("type"),
          url: text("url"),
          jsonData: isRecord(ds.jsonData) ? ds.jsonData : {},
        };
      });
    });
}

/** The provisioned data source with this uid. */
export function provisionedDataSource(uid: string): ProvisionedDataSource {
  const found = provisionedDataSources().find((d) => d.uid === uid);
  if (!found) throw new Error(`no provisioned data source has uid ${uid}`);
  return found;
}

/** The Prometheus data source's `timeInterval` (undefined when unset: Grafana then uses 15s). */
export function provisionedTimeInterval(): string | undefined {
  const value = provisionedDataSource(DATASOURCE_UID).jsonData.timeInterval;
  if (value !== undefined && typeof value !== "string")
    throw new Error("timeInterval of the Prometheus data source is not a string");
  return value;
}
