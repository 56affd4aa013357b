import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * DynamoDB Local has no option for the address it listens on: its `ServerRunner` builds a
 * Jetty `Server(port)`, which listens on every interface, and it takes any credentials. So
 * anyone on the network could read and write the local table (keys, secrets, every tenant's
 * state). This runner starts it the same way `ServerRunner.main` does, but sets the Jetty
 * connector's host to 127.0.0.1 before starting it:
 *
 *   public class AgentStateLoopbackRunner {
 *     public static void main(String[] args) throws Throwable {
 *       DynamoDBProxyServer server = ServerRunner.createServerFromCommandLineArgs(args);
 *       Field field = DynamoDBProxyServer.class.getDeclaredField("server");
 *       field.setAccessible(true);
 *       ((ServerConnector) ((Server) field.get(server)).getConnectors()[0]).setHost("127.0.0.1");
 *       server.start();
 *     }
 *   }
 *
 * Java 17's runtime (the JRE that DynamoDB Local needs) has no compiler, so the class is
 * assembled here, byte for byte: one static method without branches, which needs no stack map
 * frames (JVM spec 4.10.1). `DYNAMODB_LOOPBACK_FAILURES` tells the launcher that a future
 * DynamoDB Local has moved these internals, so it can fall back to its own `-jar` start.
 */

export const RUNNER_CLASS = 'AgentStateLoopbackRunner';

/** What the runner prints (and exits on) when DynamoDB Local's internals are not as it expects. */
export const DYNAMODB_LOOPBACK_FAILURES =
  /NoSuchFieldException|NoSuchMethodError|NoClassDefFoundError|ClassCastException|VerifyError|ClassFormatError/;

const PROXY = 'software/amazon/dynamodb/services/local/server/DynamoDBProxyServer';

/** The runner's class file (Java 8 format, loaded by any Java 8+). */
function loopbackRunnerClass(): Buffer {
  const pool: number[][] = [];
  const indexes = new Map<string, number>();
  const u2 = (value: number) => [(value >> 8) & 0xff, value & 0xff];
  const u4 = (value: number) => [(value >>> 24) & 0xff, (value >> 16) & 0xff, (value >> 8) & 0xff, value & 0xff];
  const entry = (key: string, bytes: () => number[]): number => {
    const known = indexes.get(key);
    if (known !== undefined) return known;
    pool.push(bytes());
    indexes.set(key, pool.length);
    return pool.length;
  };
  // Constant pool entries (JVM spec 4.4): tags 1 Utf8, 7 Class, 8 String, 10 Methodref, 12 NameAndType.
  const utf8 = (text: string) =>
    entry(`utf8 ${text}`, () => {
      const bytes = [...Buffer.from(text, 'utf8')];
      return [1, ...u2(bytes.length), ...bytes];
    });
  const classRef = (name: string) => entry(`class ${name}`, () => [7, ...u2(utf8(name))]);
  const string = (text: string) => entry(`string ${text}`, () => [8, ...u2(utf8(text))]);
  const method = (owner: string, name: string, descriptor: string) =>
    entry(`method ${owner}.${name}${descriptor}`, () => [
      10,
      ...u2(classRef(owner)),
      ...u2(entry(`nat ${name}${descriptor}`, () => [12, ...u2(utf8(name)), ...u2(utf8(descriptor))])),
    ]);

  const thisClass = classRef(RUNNER_CLASS);
  const superClass = classRef('java/lang/Object');
  // Opcodes: aload_0 2a, aload_1 2b, aload_2 2c, astore_1 4c, astore_2 4d, iconst_0 03,
  // iconst_1 04, aaload 32, ldc_w 13, checkcast c0, invokevirtual b6, invokestatic b8, return b1.
  const code = [
    0x2a,
    0xb8,
    ...u2(
      method(
        'software/amazon/dynamodb/services/local/main/ServerRunner',
        'createServerFromCommandLineArgs',
        `([Ljava/lang/String;)L${PROXY};`,
      ),
    ),
    0x4c,
    0x13,
    ...u2(classRef(PROXY)),
    0x13,
    ...u2(string('server')),
    0xb6,
    ...u2(method('java/lang/Class', 'getDeclaredField', '(Ljava/lang/String;)Ljava/lang/reflect/Field;')),
    0x4d,
    0x2c,
    0x04,
    0xb6,
    ...u2(method('java/lang/reflect/Field', 'setAccessible', '(Z)V')),
    0x2c,
    0x2b,
    0xb6,
    ...u2(method('java/lang/reflect/Field', 'get', '(Ljava/lang/Object;)Ljava/lang/Object;')),
    0xc0,
    ...u2(classRef('org/eclipse/jetty/server/Server')),
    0xb6,
    ...u2(method('org/eclipse/jetty/server/Server', 'getConnectors', '()[Lorg/eclipse/jetty/server/Connector;')),
    0x03,
    0x32,
    0xc0,
    ...u2(classRef('org/eclipse/jetty/server/ServerConnector')),
    0x13,
    ...u2(string('127.0.0.1')),
    0xb6,
    ...u2(method('org/eclipse/jetty/server/ServerConnector', 'setHost', '(Ljava/lang/String;)V')),
    0x2b,
    0xb6,
    ...u2(method(PROXY, 'start', '()V')),
    0xb1,
  ];
  const mainName = utf8('main');
  const mainDescriptor = utf8('([Ljava/lang/String;)V');
  const codeName = utf8('Code');
  // Code attribute: max_stack 2, max_locals 3, the code, no exception table, no attributes.
  const codeAttribute = [...u2(2), ...u2(3), ...u4(code.length), ...code, ...u2(0), ...u2(0)];
  return Buffer.from([
    ...[0xca, 0xfe, 0xba, 0xbe],
    ...u2(0), // minor version
    ...u2(52), // major version: Java 8
    ...u2(pool.length + 1),
    ...pool.flat(),
    ...u2(0x0021), // public, super
    ...u2(thisClass),
    ...u2(superClass),
    ...u2(0), // interfaces
    ...u2(0), // fields
    ...u2(1), // methods: main
    ...u2(0x0009), // public static
    ...u2(mainName),
    ...u2(mainDescriptor),
    ...u2(1),
    ...u2(codeName),
    ...u4(codeAttribute.length),
    ...codeAttribute,
    ...u2(0), // class attributes
  ]);
}

/**
 * A folder of this process's own (created fresh, mode 0700, so nobody else can put a class
 * there) holding the runner's class file, for java's class path; `remove` once java has
 * loaded it.
 */
export function loopbackRunnerDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'agentstate-dynamodb-runner-'));
  writeFileSync(join(dir, `${RUNNER_CLASS}.class`), loopbackRunnerClass(), { mode: 0o600 });
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
