/**
 * One round trip of pipelined commands, on a single Redis or a Cluster (one pipeline per hash
 * slot there), and its replies by command.
 */
import type { Redis } from "ioredis";

/** Where one command's reply is: its pipeline and its index in it. */
export interface Reply {
  group: string;
  index: number;
}

/**
 * The pipelines of one round trip: one for a single Redis; on a Cluster one per hash slot (a
 * Cluster pipeline must stay on one node), all sent at once.
 */
export class Pipelines<Pipeline extends ReturnType<Redis["pipeline"]>> {
  private readonly groups = new Map<string, Pipeline>();
  private readonly cluster: boolean;

  constructor(private readonly client: Redis) {
    this.cluster = (client as { isCluster?: boolean }).isCluster === true;
  }

  /** Queues a command on the pipeline of `slot` (a hash tag, or a key without one). */
  add(slot: string, queue: (pipeline: Pipeline) => unknown): Reply {
    const group = this.cluster ? slot : "";
    let pipeline = this.groups.get(group);
    if (!pipeline) this.groups.set(group, (pipeline = this.client.pipeline() as Pipeline));
    const index = pipeline.length;
    queue(pipeline);
    return { group, index };
  }

  async exec(): Promise<Replies> {
    const entries = [...this.groups];
    const results = await Promise.all(
      entries.map(([, pipeline]) =>
        pipeline.exec().then(
          (replies) => replies ?? new Error("Redis discarded the pipeline"),
          (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
        ),
      ),
    );
    return new Replies(new Map(entries.map(([group], i) => [group, results[i]])));
  }
}

/** The replies of a round trip, by pipeline (an Error for a pipeline that failed as a whole). */
export class Replies {
  constructor(
    private readonly groups: Map<string, [Error | null, unknown][] | Error | undefined>,
  ) {}

  error(at: Reply): Error | undefined {
    const replies = this.groups.get(at.group);
    if (!Array.isArray(replies)) return replies ?? new Error("no reply");
    return replies[at.index]?.[0] ?? undefined;
  }

  value(at: Reply): unknown {
    const replies = this.groups.get(at.group);
    return Array.isArray(replies) ? replies[at.index]?.[1] : undefined;
  }

  firstError(): Error | undefined {
    for (const replies of this.groups.values()) {
      if (!Array.isArray(replies)) return replies ?? new Error("no reply");
      for (const [error] of replies) if (error) return error;
    }
    return undefined;
  }
}
