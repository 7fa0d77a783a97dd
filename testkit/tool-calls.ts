/** The text of one tool call as a model writes it in the Hermes format (`<tool_call>` tags), for replayed policies. */
export const toolCallText = (name: string, args: unknown): string =>
  `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
