// Types the console's modules share, beyond the GraphQL API's own
// (graphql.d.ts, generated) and uPlot's (uplot.d.ts).

declare namespace GQL {
  /**
   * A query's or mutation's data: what request() in graphql.js resolves to.
   * The console reads only root fields it selected, so it is typed as every
   * root field at once; each is as nullable as the schema says.
   */
  type Data = Query & Mutation;
}

/**
 * A child that h, append and replace (dom.js) take: a node, text (a number
 * shows as text), nothing (null, undefined, false), or an array of them.
 */
type DomChild = Node | string | number | boolean | null | undefined | DomChild[];
