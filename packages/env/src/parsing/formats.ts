/** The built-in tool-call formats; each file registers itself. */
import './openai';
import './hermes';
import './react';
import './llama3-json';
