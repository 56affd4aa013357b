import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { AgentState, type AgentStateProps } from './agent-state.js';

export interface AgentStateStackProps extends StackProps {
  /**
   * Settings of the AgentState construct.
   * @default - the construct's defaults (retained, deletion-protected table; see AgentStateProps)
   */
  readonly agentState?: AgentStateProps;
}

/** The deployable stack: the AgentState construct and the outputs the CLI and docs rely on. */
export class AgentStateStack extends Stack {
  readonly agentState: AgentState;

  constructor(scope: Construct, id: string, props: AgentStateStackProps = {}) {
    super(scope, id, {
      description: 'agentstate: durable, versioned, branch-aware memory for AI-agent workers',
      ...props,
    });
    this.agentState = new AgentState(this, 'AgentState', props.agentState);

    // Output keys are a contract: docs/deploy.md and `agentstate keys --stack` read them.
    new CfnOutput(this, 'ApiUrl', {
      value: this.agentState.apiUrl,
      description: 'Base URL of the HTTP API (API.md), e.g. <ApiUrl>/health',
    });
    new CfnOutput(this, 'InspectorUrl', {
      value: this.agentState.inspectorUrl,
      description: 'The inspector page (docs/inspector.md): open it in a browser and sign in with an API key',
    });
    new CfnOutput(this, 'TableName', {
      value: this.agentState.table.tableName,
      description: 'The DynamoDB table (agentstate keys --table <TableName>)',
    });
    new CfnOutput(this, 'WebSocketUrl', {
      value: this.agentState.webSocketUrl,
      description: 'Live sync (API.md section 9): <WebSocketUrl>?token=<api-key>, then {"action":"subscribe","sessionId":"…"}',
    });
    new CfnOutput(this, 'AlarmTopicArn', {
      value: this.agentState.alarmTopic.topicArn,
      description: 'The SNS topic every alarm notifies (subscribe an address, a pager or a chat channel to it)',
    });
    new CfnOutput(this, 'EventBusName', {
      value: this.agentState.eventBus.eventBusName,
      description: 'The EventBridge bus of change events (source agentstate, detail-type state.changed)',
    });
  }
}
